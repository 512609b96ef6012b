//! `sluice demo` as a process: the built-in config, its event and the ECS it becomes, with
//! no network (the endpoints point nowhere and no credentials are set) and no files (it
//! runs from an empty directory).

use serde_json::{Value, json};

use crate::common::{Dir, workspace_root};

#[test]
fn demo_prints_the_config_the_input_and_the_output() {
    let dir = Dir::new();
    let out = dir.sluice_env(
        &["demo"],
        "",
        &[
            ("AWS_ENDPOINT_URL".into(), "http://127.0.0.1:9".into()),
            ("AWS_EC2_METADATA_DISABLED".into(), "true".into()),
        ],
    );
    out.assert_clean_success();
    let text = out.stdout_str();
    let config = std::fs::read_to_string(workspace_root().join("examples/demo/config.jsonnet"))
        .expect("the demo config");
    let sections: Vec<&str> = text.split("\n# ").collect();
    assert_eq!(sections.len(), 4, "{text}");
    assert_eq!(
        sections[0],
        format!(
            "# config (examples/demo/config.jsonnet)\n\n{}\n",
            config.trim_end()
        )
    );
    let input = sections[1]
        .strip_prefix("input (one line)\n\n")
        .expect("input");
    let input: Value = serde_json::from_str(input.trim()).expect("input is one JSON line");
    assert_eq!(input["eventName"], "ConsoleLogin");
    let output = sections[2]
        .strip_prefix("output (what send_stdout wrote)\n\n")
        .expect("output");
    let lines: Vec<&str> = output.trim().lines().collect();
    assert_eq!(lines.len(), 1, "{output}");
    let ecs: Value = serde_json::from_str(lines[0]).expect("output is JSON");
    assert_eq!(ecs["event"]["original"], input);
    assert_eq!(ecs["event"]["outcome"], "failure", "{ecs}");
    for (path, want) in [
        ("/@timestamp", json!("2024-01-15T18:44:03Z")),
        ("/cloud/service/name", json!("signin")),
        ("/source/ip", json!("192.0.2.30")),
        ("/user/name", json!("Mary")),
        ("/event/kind", json!("event")),
    ] {
        assert_eq!(ecs.pointer(path), Some(&want), "{path} in {ecs}");
    }
    assert_eq!(ecs["event"]["hash"].as_str().map(str::len), Some(64));
    assert!(sections[3].starts_with("try it yourself"), "{text}");
}
