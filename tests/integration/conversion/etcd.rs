//! etcd, read directly: what the API server really stored.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use k8s_openapi::ByteString;
use kube::Client;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};
use support::ControlPlane;
use support::cluster::{minimal_spec, tas, tas_api};
use support::wait;

/// The control plane's etcd client URL, from its command line (`--data-dir` names this
/// control plane's folder).
pub(super) fn etcd_url(cp: &ControlPlane) -> String {
    let data_dir = format!("--data-dir={}", cp.dir.join("etcd").display());
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.contains(&data_dir)
            && let Some(url) = args
                .iter()
                .find_map(|a| a.strip_prefix("--listen-client-urls="))
        {
            return url.to_string();
        }
    }
    panic!("no etcd process with {data_dir}");
}

/// The `apiVersion` etcd holds for a TrustyAIService (through etcd's JSON gateway).
pub(super) fn stored_as(etcd: &str, ns: &str, name: &str) -> String {
    let key = format!("/registry/trustyai.opendatahub.io/trustyaiservices/{ns}/{name}");
    let body = json!({"key": ByteString(key.clone().into_bytes())}).to_string();
    let address = etcd.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).expect("etcd");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    // HTTP/1.0: the answer comes whole, never chunked.
    write!(
        stream,
        "POST /v3/kv/range HTTP/1.0\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let (_, payload) = response.split_once("\r\n\r\n").expect("HTTP response");
    let payload: Value = serde_json::from_str(payload).expect("JSON from etcd");
    let value = payload["kvs"][0]["value"].clone();
    assert!(value.is_string(), "{key} is not in etcd: {payload}");
    let bytes: ByteString = serde_json::from_value(value).expect("base64");
    let object: Value = serde_json::from_slice(&bytes.0).expect("a JSON object in etcd");
    object["apiVersion"]
        .as_str()
        .expect("apiVersion")
        .to_string()
}

/// Waits until the API server stores new objects in `version`: it switches its encoder when
/// its CRD informer delivers a change, so a probe object is created until etcd shows it there.
pub(super) async fn wait_storing(client: &Client, etcd: &str, ns: &str, version: &str) {
    let api = tas_api(client, ns, version);
    let want = format!("trustyai.opendatahub.io/{version}");
    let mut attempt = 0;
    let mut last_create = None;
    let stored = wait::within(Duration::from_secs(30), async || {
        let name = format!("probe-{version}-{attempt}");
        attempt += 1;
        let created = api
            .create(&PostParams::default(), &tas(version, &name, minimal_spec()))
            .await;
        let landed = created.is_ok() && stored_as(etcd, ns, &name) == want;
        if created.is_ok() {
            // Best effort: the answer to a delete is converted too, which fails for an object
            // that landed in the other version while conversion is not served yet.
            let _ = api.delete(&name, &DeleteParams::default()).await;
        }
        last_create = Some(created);
        landed.then_some(())
    })
    .await;
    assert!(
        stored.is_some(),
        "new objects are not stored as {version} within 30s (last create: {last_create:?})"
    );
}
