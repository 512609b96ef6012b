//! `AWS_API_GATEWAY` and `AWS_LAMBDA`: synchronous requests whose answer is the pipeline's
//! output.
//!
//! The request (API Gateway: the body, decoded when `isBase64Encoded`, with `resource`,
//! `path` and `headers` as metadata; a plain invoke: the event JSON, no metadata) goes
//! through the pipeline with a ctrl, and the answer is the JSON array of every data message
//! that came out, as in Substation. An output that is not JSON cannot be put in the array.
//!
//! Errors are answers, not function errors (Substation returns both, so API Gateway
//! clients see a 502): API Gateway gets `{"statusCode":400|500,"body":{"error":..}}`, a plain
//! invoke gets `{"statusCode":400|500,"error":..}`. 400 is a request that is not the event
//! it should be, 500 a pipeline failure or an output that is not JSON. Each failed request
//! is one log line with the reason: `bad request` (a 400, WARN), `request failed` or
//! `invoke failed` (ERROR).

use aws_lambda_events::event::apigw::ApiGatewayProxyRequest;
use base64::Engine;
use serde_json::{Value, json};

use super::{Function, HandlerError, HandlerKind, message};

/// What a synchronous request produced: outputs, or an HTTP status and a reason.
async fn answer(f: &Function, data: Vec<u8>, meta: &Value) -> Result<Vec<Value>, (u16, String)> {
    let run = f.run(vec![vec![message(data, meta)]], true).await;
    if let Some(e) = run.error {
        return Err((500, e));
    }
    if let Some(super::Delivery::Failed(why)) = run.deliveries.first() {
        return Err((500, why.clone()));
    }
    run.outputs
        .iter()
        .map(|(_, d)| {
            serde_json::from_slice(d).map_err(|_| {
                (
                    500,
                    "transformed data is invalid JSON and cannot be returned".to_string(),
                )
            })
        })
        .collect()
}

pub(crate) async fn handle_gateway(f: &Function, payload: Value) -> Result<Value, HandlerError> {
    let reply = |status: u16, body: Value| {
        json!({
            "statusCode": status,
            "headers": {"Content-Type": "application/json"},
            "isBase64Encoded": false,
            "body": body.to_string(),
        })
    };
    let req: ApiGatewayProxyRequest = match serde_json::from_value(payload) {
        Ok(r) => r,
        Err(e) => {
            let why = format!(
                "the event is not a valid {} event: {e}",
                HandlerKind::ApiGateway.name()
            );
            tracing::warn!(error = %why, "bad request");
            return Ok(reply(400, json!({ "error": why })));
        }
    };
    let body = req.body.unwrap_or_default();
    let data = if req.is_base64_encoded {
        match base64::engine::general_purpose::STANDARD.decode(body.as_bytes()) {
            Ok(d) => d,
            Err(e) => {
                let why = format!("the body is marked base64 but is not: {e}");
                tracing::warn!(error = %why, "bad request");
                return Ok(reply(400, json!({ "error": why })));
            }
        }
    } else {
        body.into_bytes()
    };
    let headers: serde_json::Map<String, Value> = req
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned()),
            )
        })
        .collect();
    let meta = json!({ "resource": req.resource, "path": req.path, "headers": headers });
    Ok(match answer(f, data, &meta).await {
        Ok(outs) => reply(200, Value::Array(outs)),
        Err((status, why)) => {
            tracing::error!(status, error = %why, "request failed");
            reply(status, json!({ "error": why }))
        }
    })
}

pub(crate) async fn handle_invoke(f: &Function, payload: Value) -> Result<Value, HandlerError> {
    let data = serde_json::to_vec(&payload).unwrap_or_default();
    Ok(match answer(f, data, &Value::Null).await {
        Ok(outs) => Value::Array(outs),
        Err((status, why)) => {
            tracing::error!(status, error = %why, "invoke failed");
            json!({ "statusCode": status, "error": why })
        }
    })
}
