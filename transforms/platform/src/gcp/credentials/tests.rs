//! Tests of `credentials`: the files and the order they are found in, and each way of
//! getting a token against a token endpoint (or metadata server) on loopback that checks
//! what Google's would (the JWT's signature with the key's public half, the form's fields,
//! the metadata header).

use std::collections::HashMap;
use std::sync::Mutex;

use ring::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};

use super::*;
use crate::http::test_server::{Reply, Request, Server};

const PKCS8: &str = include_str!("../testdata/test_key.pem");
const PKCS1: &str = include_str!("../testdata/test_key_pkcs1.pem");
const OTHER: &str = include_str!("../testdata/other_key.pem");
const PUBLIC: &[u8] = include_bytes!("../testdata/test_key_public.der");
const EMAIL: &str = "sender@project.iam.gserviceaccount.com";

fn env(vars: &[(&str, &str)]) -> Env {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Arc::new(move |k| vars.get(k).cloned())
}

fn service_account(token_uri: &str, key: &str) -> String {
    serde_json::json!({
        "type": "service_account",
        "project_id": "p",
        "private_key_id": "key-1",
        "private_key": key,
        "client_email": EMAIL,
        "token_uri": token_uri,
    })
    .to_string()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The form fields of a request.
fn fields(r: &Request) -> HashMap<String, String> {
    url::form_urlencoded::parse(&r.body).into_owned().collect()
}

fn error_of(text: &str) -> String {
    match from_file(text.as_bytes(), Path::new("/k.json")) {
        Ok(_) => panic!("{text}: read"),
        Err(e) => e,
    }
}

#[test]
fn files_table() {
    for key in [PKCS8, PKCS1] {
        let s = from_file(
            service_account(TOKEN_URI, key).as_bytes(),
            Path::new("/k.json"),
        )
        .unwrap();
        assert_eq!(
            s.describe(),
            format!("service account {EMAIL}, key file /k.json")
        );
    }
    let user =
        r#"{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"}"#;
    match from_file(user.as_bytes(), Path::new("/u.json")).unwrap() {
        Source::AuthorizedUser { token_uri, .. } => assert_eq!(token_uri, TOKEN_URI),
        _ => panic!("not a user"),
    }
    for (text, want) in [
        (
            "not json",
            "Google credentials file /k.json: not a credentials file",
        ),
        (r#"{"client_email":"a"}"#, "type is missing"),
        (
            r#"{"type":"external_account"}"#,
            "credentials of type \"external_account\" are not supported",
        ),
        (
            r#"{"type":"service_account","client_email":"a"}"#,
            "private_key is missing",
        ),
        (
            r#"{"type":"service_account","client_email":"a","private_key":"xyz"}"#,
            "private_key: not a PEM private key",
        ),
        (
            r#"{"type":"service_account","client_email":"a","private_key":"-----BEGIN PRIVATE KEY-----\n!!\n-----END PRIVATE KEY-----"}"#,
            "private_key: the PEM's base64 is damaged",
        ),
        (
            r#"{"type":"service_account","client_email":"a","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"}"#,
            "private_key: not an RSA key",
        ),
        (
            r#"{"type":"authorized_user","client_id":"c","client_secret":"s"}"#,
            "refresh_token is missing",
        ),
    ] {
        let e = error_of(text);
        assert!(e.contains(want), "{text}: {e}");
    }
    let no_email = service_account(TOKEN_URI, PKCS8).replace(EMAIL, "");
    assert!(error_of(&no_email).contains("client_email is missing"));
}

#[test]
fn discovery_order_table() {
    let dir = tempfile::tempdir().unwrap();
    let key = write(dir.path(), "key.json", &service_account(TOKEN_URI, PKCS8));
    let gcloud = dir.path().join("gcloud");
    std::fs::create_dir(&gcloud).unwrap();
    write(
        &gcloud,
        "application_default_credentials.json",
        r#"{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"}"#,
    );
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".config/gcloud")).unwrap();
    write(
        &home.join(".config/gcloud"),
        "application_default_credentials.json",
        &service_account(TOKEN_URI, PKCS1),
    );
    let key = key.to_str().unwrap();
    let gcloud = gcloud.to_str().unwrap();
    let home = home.to_str().unwrap();
    let empty = dir.path().join("empty");
    let empty = empty.to_str().unwrap();
    let home_file = format!("{home}/.config/gcloud/application_default_credentials.json");
    let gcloud_file = format!("user credentials in {gcloud}/application_default_credentials.json");
    for (vars, want) in [
        (
            vec![
                ("GOOGLE_APPLICATION_CREDENTIALS", key),
                ("CLOUDSDK_CONFIG", gcloud),
            ],
            format!("service account {EMAIL}, key file {key}"),
        ),
        (
            vec![("CLOUDSDK_CONFIG", gcloud), ("HOME", home)],
            gcloud_file,
        ),
        (
            vec![("HOME", home)],
            format!("service account {EMAIL}, key file {home_file}"),
        ),
        (
            vec![("HOME", empty)],
            "metadata server at http://169.254.169.254".to_string(),
        ),
        (
            vec![("HOME", empty), ("GCE_METADATA_HOST", "127.0.0.1:9")],
            "metadata server at http://127.0.0.1:9".to_string(),
        ),
    ] {
        let found = discover(&*env(&vars)).unwrap();
        assert_eq!(found.describe(), want, "{vars:?}");
    }
    let e = match discover(&*env(&[("GOOGLE_APPLICATION_CREDENTIALS", empty)])) {
        Ok(_) => panic!("found"),
        Err(e) => e,
    };
    assert!(
        e.starts_with(&format!(
            "GOOGLE_APPLICATION_CREDENTIALS names {empty}, which cannot be read"
        )),
        "{e}"
    );
}

/// A token endpoint that checks a service account's JWT as Google's does and answers
/// tokens `t1`, `t2`, ... living `lifetime` seconds.
fn token_endpoint(lifetime: u64) -> Server {
    let issued = Mutex::new(0);
    Server::start(move |r| {
        let f = fields(r);
        if r.method != "POST"
            || r.header("content-type") != Some("application/x-www-form-urlencoded")
            || f.get("grant_type").map(String::as_str)
                != Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
        {
            return Reply::status(400, r#"{"error":"unsupported_grant_type"}"#);
        }
        let jwt = &f["assertion"];
        let (signed, signature) = jwt.rsplit_once('.').unwrap();
        let signature = URL_SAFE_NO_PAD.decode(signature).unwrap();
        if UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, PUBLIC)
            .verify(signed.as_bytes(), &signature)
            .is_err()
        {
            return Reply::status(
                400,
                r#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#,
            );
        }
        let (header, claims) = signed.split_once('.').unwrap();
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
        assert_eq!(header["alg"], "RS256");
        assert_eq!(header["kid"], "key-1");
        assert_eq!(claims["iss"], EMAIL);
        assert_eq!(claims["scope"], STORAGE_SCOPE);
        assert!(claims["aud"].as_str().unwrap().ends_with("/token"));
        assert_eq!(
            claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
            3600
        );
        let mut n = issued.lock().unwrap();
        *n += 1;
        Reply::ok(&format!(
            r#"{{"access_token":"t{n}","expires_in":{lifetime},"token_type":"Bearer"}}"#
        ))
    })
}

#[tokio::test]
async fn a_service_account_signs_for_its_token_which_is_kept_until_near_expiry() {
    for (key, lifetime, want) in [
        (PKCS8, 3600, ["t1", "t1"]),
        (PKCS1, 3600, ["t1", "t1"]),
        // A token living less than the renewal margin is fetched again each time.
        (PKCS8, 30, ["t1", "t2"]),
    ] {
        let server = token_endpoint(lifetime);
        let dir = tempfile::tempdir().unwrap();
        let file = write(
            dir.path(),
            "k.json",
            &service_account(&format!("{}/token", server.url()), key),
        );
        let c = Credentials::new(
            env(&[("GOOGLE_APPLICATION_CREDENTIALS", file.to_str().unwrap())]),
            STORAGE_SCOPE,
        );
        let got = [c.token().await.unwrap(), c.token().await.unwrap()];
        assert_eq!(got, want);
        assert_eq!(
            server.requests().len(),
            if want[0] == want[1] { 1 } else { 2 }
        );
    }
}

#[tokio::test]
async fn a_refused_token_request_names_the_account_the_file_and_the_answer() {
    let server = token_endpoint(3600);
    let dir = tempfile::tempdir().unwrap();
    // Signed with a key the endpoint does not know.
    let file = write(
        dir.path(),
        "k.json",
        &service_account(&format!("{}/token", server.url()), OTHER),
    );
    let c = Credentials::new(
        env(&[("GOOGLE_APPLICATION_CREDENTIALS", file.to_str().unwrap())]),
        STORAGE_SCOPE,
    );
    let e = c.token().await.unwrap_err();
    assert!(
        e.starts_with(&format!(
            "getting a Google access token (service account {EMAIL}, key file {}): POST {}/token: HTTP 400 (body omitted: the request carried a secret)",
            file.display(),
            server.url()
        )),
        "{e}"
    );
    // The form carried a signed assertion: what the endpoint answered is left out.
    assert!(!e.contains("Invalid JWT Signature."), "{e}");
    // A 400 is not retried.
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_user_refreshes_its_token() {
    let server = Server::start(|r| {
        let f = fields(r);
        let want = [
            ("grant_type", "refresh_token"),
            ("client_id", "id.apps.googleusercontent.com"),
            ("client_secret", "s&cret"),
            ("refresh_token", "1//r"),
        ];
        if want
            .iter()
            .all(|(k, v)| f.get(*k).map(String::as_str) == Some(v))
        {
            Reply::ok(r#"{"access_token":"user-token","expires_in":3599}"#)
        } else {
            Reply::status(400, r#"{"error":"invalid_request"}"#)
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let file = serde_json::json!({
        "type": "authorized_user",
        "client_id": "id.apps.googleusercontent.com",
        "client_secret": "s&cret",
        "refresh_token": "1//r",
        "token_uri": format!("{}/token", server.url()),
    });
    write(
        dir.path(),
        "application_default_credentials.json",
        &file.to_string(),
    );
    let c = Credentials::new(
        env(&[("CLOUDSDK_CONFIG", dir.path().to_str().unwrap())]),
        STORAGE_SCOPE,
    );
    assert_eq!(c.token().await.unwrap(), "user-token");
    assert_eq!(
        c.headers().await.unwrap(),
        [("authorization", "Bearer user-token".to_string())]
    );
    // A user's calls are billed to the file's quota project, or to the environment's.
    let mut file: serde_json::Value = file;
    file["quota_project_id"] = "billing-1".into();
    write(
        dir.path(),
        "application_default_credentials.json",
        &file.to_string(),
    );
    for (vars, want) in [
        (vec![], "billing-1"),
        (
            vec![("GOOGLE_CLOUD_QUOTA_PROJECT", "billing-2")],
            "billing-2",
        ),
    ] {
        let mut vars = vars;
        vars.push(("CLOUDSDK_CONFIG", dir.path().to_str().unwrap()));
        let c = Credentials::new(env(&vars), STORAGE_SCOPE);
        assert_eq!(
            c.headers().await.unwrap(),
            [
                ("authorization", "Bearer user-token".to_string()),
                ("x-goog-user-project", want.to_string())
            ]
        );
    }
}

#[tokio::test]
async fn the_metadata_server_gives_the_token_on_google_cloud() {
    let server = Server::start(|r| {
        let path_ok = r.path
            == "/computeMetadata/v1/instance/service-accounts/default/token?scopes=https%3A%2F%2Fwww.googleapis.com%2Fauth%2Fdevstorage.read_write";
        if r.header("metadata-flavor") == Some("Google") && path_ok && r.method == "GET" {
            Reply::ok(r#"{"access_token":"meta-token","expires_in":3599,"token_type":"Bearer"}"#)
        } else {
            Reply::status(403, "missing Metadata-Flavor")
        }
    });
    let host = server.url().trim_start_matches("http://").to_string();
    let dir = tempfile::tempdir().unwrap();
    let c = Credentials::new(
        env(&[
            ("HOME", dir.path().to_str().unwrap()),
            ("GCE_METADATA_HOST", &host),
        ]),
        STORAGE_SCOPE,
    );
    assert_eq!(c.token().await.unwrap(), "meta-token");
}

#[tokio::test]
async fn without_credentials_the_error_says_where_it_looked_and_what_to_do() {
    // A port nothing listens on: the connection is refused at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let c = Credentials::new(
        env(&[
            ("HOME", dir.path().to_str().unwrap()),
            ("GCE_METADATA_HOST", &format!("127.0.0.1:{port}")),
        ]),
        STORAGE_SCOPE,
    );
    let e = c.token().await.unwrap_err();
    assert!(
        e.starts_with(&format!(
            "getting a Google access token (metadata server at http://127.0.0.1:{port}): the metadata server at http://127.0.0.1:{port} did not give one (request failed"
        )),
        "{e}"
    );
    assert!(
        e.ends_with(
            "outside Google Cloud, set GOOGLE_APPLICATION_CREDENTIALS to a service account key file or run `gcloud auth application-default login`"
        ),
        "{e}"
    );
}
