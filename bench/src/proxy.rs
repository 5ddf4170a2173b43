//! A counting proxy between the operator and the API server: the operator's kubeconfig points
//! at `http://127.0.0.1:<port>` and every request it makes is counted (by verb and resource)
//! and forwarded with the admin credentials. Watches stream through unchanged. The API
//! server's own metrics cannot tell the operator's requests from the controller-manager's,
//! kwok's or the harness's; this can.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::net::TcpListener;

/// Requests seen, by `"<verb> <resource>"` (`"patch trustyaiservices/status"`).
#[derive(Debug, Default)]
pub struct Counts(Mutex<BTreeMap<String, u64>>);

impl Counts {
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

/// The requests in `after` that were not yet in `before`.
pub fn difference(
    after: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0);
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

/// Whether a counted key is a write (create, update, patch, delete).
pub fn is_write(key: &str) -> bool {
    [
        "create ",
        "update ",
        "patch ",
        "delete ",
        "deletecollection ",
    ]
    .iter()
    .any(|verb| key.starts_with(verb))
}

pub fn total(counts: &BTreeMap<String, u64>, filter: impl Fn(&str) -> bool) -> u64 {
    counts
        .iter()
        .filter(|(k, _)| filter(k))
        .map(|(_, v)| v)
        .sum()
}

/// The verb and resource of a request, as the API server's metrics name them.
pub fn classify(method: &Method, path: &str, query: Option<&str>) -> String {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match parts.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return format!("{} {}", method.as_str().to_lowercase(), "non-resource"),
    };
    let (resource, name, sub) = match rest {
        [] => return "get discovery".to_owned(),
        ["namespaces", _ns, resource, tail @ ..] => (*resource, tail.first(), tail.get(1)),
        [resource, tail @ ..] => (*resource, tail.first(), tail.get(1)),
    };
    let resource = match sub {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_owned(),
    };
    let watch = query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match *method {
        Method::GET if watch => "watch",
        Method::GET if name.is_some() => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if name.is_some() => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    };
    format!("{verb} {resource}")
}

#[derive(Clone)]
struct ProxyState {
    client: kube::Client,
    counts: Arc<Counts>,
}

async fn forward(State(state): State<ProxyState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let key = classify(&parts.method, parts.uri.path(), parts.uri.query());
    if let Ok(mut counts) = state.counts.0.lock() {
        *counts.entry(key).or_default() += 1;
    }
    let bytes = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let mut builder = axum::http::Request::builder().method(parts.method).uri(
        parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/"),
    );
    for (name, value) in &parts.headers {
        if !matches!(
            name.as_str(),
            "host" | "connection" | "authorization" | "content-length" | "transfer-encoding"
        ) {
            builder = builder.header(name, value);
        }
    }
    let outgoing = match builder.body(kube::client::Body::from(bytes.to_vec())) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    match state.client.send(outgoing).await {
        Ok(response) => response.map(Body::new),
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

/// Starts the proxy on a free loopback port; returns its port and counters.
pub async fn start(client: kube::Client) -> Result<(u16, Arc<Counts>)> {
    let counts = Arc::new(Counts::default());
    let app = axum::Router::new()
        .fallback(forward)
        .with_state(ProxyState {
            client,
            counts: counts.clone(),
        });
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((port, counts))
}

/// A kubeconfig for `http://127.0.0.1:<port>` without credentials (the proxy adds them).
pub fn write_kubeconfig(path: &Path, port: u16) -> std::io::Result<()> {
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             users:\n- name: operator\n  user: {{}}\n\
             contexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: operator\n    namespace: default\n\
             current-context: proxy\n"
        ),
    )
}
