//! The bootstrap: the init (config, pipeline, runtime) and the runtime API loop.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, anyhow};
use lambda_runtime::LambdaEvent;
use serde_json::Value;

#[cfg(feature = "aws")]
use super::autoscale;
use super::event::EVENT_KIND;
use super::{Event, Function, HandlerError, HandlerKind, Options, telemetry};

/// Loads the config at `location` (a path, `s3://` or `https://`) and builds the function.
/// Must be called outside any tokio runtime (URL configs are fetched on one of their own).
/// Returns the function and the number of workers it wants.
pub fn load(location: &str, mut opts: Options) -> anyhow::Result<(Function, usize)> {
    let cfg = if sluice_config::remote::is_url(location) {
        sluice_config::remote::load(location, &[])?
    } else {
        sluice_config::load(std::path::Path::new(location), &[])?
    };
    let registry = sluice_transforms::registry();
    let built = registry
        .build_pipeline(cfg.transforms(), "transforms")
        .with_context(|| location.to_string())?;
    super::answers::check_locks(opts.kind, cfg.transforms())
        .map_err(|e| anyhow!("{location}: {e}"))?;
    let locks = sluice_config::lock_lint::warnings(cfg.transforms(), "transforms");
    for w in built.warnings.iter().chain(&locks) {
        tracing::warn!(config = location, "{w}");
    }
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let workers = cfg.concurrency()?.unwrap_or(cpus).max(1);
    if opts.function_name.is_empty() {
        opts.function_name = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_default();
    }
    Ok((
        Function::new(built.value.with_workers(workers), opts),
        workers,
    ))
}

/// The handler named by `SLUICE_LAMBDA_HANDLER` (or `SUBSTATION_LAMBDA_HANDLER`).
pub fn handler_from_env() -> anyhow::Result<HandlerKind> {
    let handler = std::env::var("SLUICE_LAMBDA_HANDLER")
        .or_else(|_| std::env::var("SUBSTATION_LAMBDA_HANDLER"))
        .map_err(|_| anyhow!("SLUICE_LAMBDA_HANDLER is not set"))?;
    HandlerKind::parse(&handler).map_err(|e| anyhow!("SLUICE_LAMBDA_HANDLER: {e}"))
}

/// Reads the environment of a pipeline handler: `SLUICE_CONFIG`, the handler, the options.
/// (`AWS_KINESIS_AUTOSCALE` reads its own: [`autoscale::main`].)
pub fn options_from_env() -> anyhow::Result<(String, Options)> {
    let config = std::env::var("SLUICE_CONFIG")
        .or_else(|_| std::env::var("SUBSTATION_CONFIG"))
        .map_err(|_| {
            anyhow!("SLUICE_CONFIG is not set (a path, s3://bucket/key or https:// URL)")
        })?;
    let kind = handler_from_env()?;
    let mut opts = Options::new(kind);
    if let Ok(v) = std::env::var("SLUICE_REPORT_BATCH_ITEM_FAILURES") {
        opts.report_batch_item_failures = match v.trim() {
            "true" | "1" => true,
            "false" | "0" | "" => false,
            other => {
                return Err(anyhow!(
                    "SLUICE_REPORT_BATCH_ITEM_FAILURES: expected true or false, got {other:?}"
                ));
            }
        };
    }
    if let Ok(v) = std::env::var("SLUICE_MAX_OBJECT_BYTES") {
        opts.max_object_bytes = v.trim().parse().map_err(|_| {
            anyhow!("SLUICE_MAX_OBJECT_BYTES: expected a number of bytes, got {v:?}")
        })?;
    }
    if let Ok(v) = std::env::var("SLUICE_BATCH_BYTES") {
        opts.feed_bytes = match v.trim().parse() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(anyhow!(
                    "SLUICE_BATCH_BYTES: expected a number of bytes above 0, got {v:?}"
                ));
            }
        };
    }
    if std::env::var("SLUICE_METRICS").is_ok_and(|v| v == "off") {
        opts.metrics = None;
    }
    Ok((config, opts))
}

/// The bootstrap: init (config, pipeline, runtime), then the runtime API loop; or, for
/// `AWS_KINESIS_AUTOSCALE`, `autoscale::main` (in a build with the `aws` feature).
pub fn main() -> ExitCode {
    telemetry::init_logs();
    let started = Instant::now();
    if handler_from_env().ok() == Some(HandlerKind::KinesisAutoscale) {
        #[cfg(feature = "aws")]
        return autoscale::main(started);
        #[cfg(not(feature = "aws"))]
        {
            tracing::error!(
                error = "AWS_KINESIS_AUTOSCALE needs a build with the `aws` feature",
                "init failed"
            );
            return ExitCode::FAILURE;
        }
    }
    let init = options_from_env().and_then(|(config, opts)| {
        let (f, workers) =
            load(&config, opts).with_context(|| format!("SLUICE_CONFIG={config}"))?;
        Ok((f, workers, config))
    });
    let (function, workers, config) = match init {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "init failed");
            return ExitCode::FAILURE;
        }
    };
    let Some(runtime) =
        build_runtime(tokio::runtime::Builder::new_multi_thread().worker_threads(workers))
    else {
        return ExitCode::FAILURE;
    };
    let function = Arc::new(function);
    // During the init: an extension registers before the runtime loop starts.
    #[cfg(feature = "aws")]
    runtime.block_on(super::shutdown::settle_on_sigterm(function.clone()));
    tracing::info!(
        config = %config,
        handler = function.opts.kind.name(),
        workers,
        init_ms = started.elapsed().as_secs_f64() * 1e3,
        "init done"
    );
    let _ = EVENT_KIND.set(function.opts.kind);
    serve(&runtime, move |event| {
        let f = function.clone();
        async move { f.handle_event(event).await }
    })
}

/// A tokio runtime from `builder`, or `None` after logging why the init failed.
pub(crate) fn build_runtime(
    builder: &mut tokio::runtime::Builder,
) -> Option<tokio::runtime::Runtime> {
    match builder.enable_all().build() {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::error!(error = %e, "init failed: no tokio runtime");
            None
        }
    }
}

/// The runtime API loop, each invocation answered by `handler`, until the loop ends.
pub(crate) fn serve<F, Fut>(runtime: &tokio::runtime::Runtime, handler: F) -> ExitCode
where
    F: Fn(LambdaEvent<Event>) -> Fut,
    Fut: std::future::Future<Output = Result<Value, HandlerError>>,
{
    match runtime.block_on(lambda_runtime::run(lambda_runtime::service_fn(handler))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "the runtime loop ended");
            ExitCode::FAILURE
        }
    }
}
