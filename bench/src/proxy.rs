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
            // Saturating: a counter that went down (it cannot, but a panic here would lose the
            // whole run) counts as no new requests.
            let d = v.saturating_sub(before.get(k).copied().unwrap_or(0));
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
        // `namespaces/<ns>/status` and `namespaces/<ns>/finalize` are subresources of the
        // Namespace itself, not resources in it (as the API server's request info has it).
        ["namespaces", _ns, resource, tail @ ..] if !matches!(*resource, "status" | "finalize") => {
            (*resource, tail.first(), tail.get(1))
        }
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
    if std::env::var_os("TRUSTYAI_BENCH_TRACE_REQUESTS").is_some() {
        // One line per request on stderr, for finding out where a count comes from.
        eprintln!("request {key}: {} {}", parts.method, parts.uri);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, query: Option<&str>) -> String {
        classify(&Method::GET, path, query)
    }

    const TAS: &str = "/apis/trustyai.opendatahub.io/v1/namespaces/x/trustyaiservices";

    fn counts(entries: &[(&str, u64)]) -> BTreeMap<String, u64> {
        entries.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
    }

    #[test]
    fn core_group_reads_are_classified_by_their_verb() {
        assert_eq!(get("/api/v1/namespaces/x/secrets/y", None), "get secrets");
        assert_eq!(get("/api/v1/namespaces/x/secrets", None), "list secrets");
        assert_eq!(
            get(
                "/api/v1/namespaces/x/secrets",
                Some("fieldSelector=metadata.name%3Dy&watch=true&resourceVersion=10")
            ),
            "watch secrets"
        );
        assert_eq!(
            get("/api/v1/namespaces/x/secrets", Some("watch=1")),
            "watch secrets"
        );
        assert_eq!(
            get("/api/v1/namespaces/x/secrets", Some("watch=false")),
            "list secrets"
        );
    }

    #[test]
    fn named_group_resources() {
        assert_eq!(
            get("/apis/apps/v1/namespaces/x/deployments", Some("watch=true")),
            "watch deployments"
        );
        assert_eq!(
            get("/apis/apps/v1/namespaces/x/deployments/d", None),
            "get deployments"
        );
        // Across all namespaces.
        assert_eq!(get("/apis/apps/v1/deployments", None), "list deployments");
        assert_eq!(
            get(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/trustyaiservices.trustyai.opendatahub.io",
                None
            ),
            "get customresourcedefinitions"
        );
    }

    #[test]
    fn a_subresource_is_named_after_its_resource() {
        assert_eq!(
            classify(&Method::PATCH, &format!("{TAS}/t/status"), None),
            "patch trustyaiservices/status"
        );
    }

    #[test]
    fn non_get_methods_map_to_their_kubernetes_verb() {
        let tas = TAS;
        assert_eq!(
            classify(&Method::POST, tas, None),
            "create trustyaiservices"
        );
        assert_eq!(
            classify(&Method::PUT, &format!("{tas}/t"), None),
            "update trustyaiservices"
        );
        assert_eq!(
            classify(&Method::DELETE, &format!("{tas}/t"), None),
            "delete trustyaiservices"
        );
        assert_eq!(
            classify(&Method::DELETE, tas, None),
            "deletecollection trustyaiservices"
        );
        assert_eq!(
            classify(
                &Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/op/leases/trustyai-operator",
                None
            ),
            "update leases"
        );
        assert_eq!(
            classify(&Method::HEAD, "/api/v1/namespaces/x/secrets/y", None),
            "other secrets"
        );
    }

    #[test]
    fn namespaces_themselves() {
        assert_eq!(get("/api/v1/namespaces", None), "list namespaces");
        assert_eq!(get("/api/v1/namespaces/x", None), "get namespaces");
        assert_eq!(
            classify(&Method::POST, "/api/v1/namespaces", None),
            "create namespaces"
        );
        // The Namespace's own subresources are not resources named `status` or `finalize`.
        assert_eq!(
            get("/api/v1/namespaces/x/status", None),
            "get namespaces/status"
        );
        assert_eq!(
            classify(&Method::PUT, "/api/v1/namespaces/x/finalize", None),
            "update namespaces/finalize"
        );
    }

    #[test]
    fn group_version_paths_are_discovery() {
        assert_eq!(get("/api/v1", None), "get discovery");
        assert_eq!(get("/apis/apps/v1", None), "get discovery");
    }

    #[test]
    fn paths_outside_any_api_group_version_are_non_resource() {
        assert_eq!(get("/api", None), "get non-resource");
        assert_eq!(get("/apis", None), "get non-resource");
        assert_eq!(get("/version", None), "get non-resource");
        assert_eq!(get("/", None), "get non-resource");
        assert_eq!(
            classify(&Method::POST, "/openapi/v3", None),
            "post non-resource"
        );
    }

    #[test]
    fn trailing_slash_is_ignored() {
        assert_eq!(get("/api/v1/namespaces/x/secrets/", None), "list secrets");
    }

    #[test]
    fn writes_are_create_update_patch_delete() {
        for key in [
            "create secrets",
            "update leases",
            "patch trustyaiservices/status",
            "delete services",
            "deletecollection secrets",
        ] {
            assert!(is_write(key), "{key}");
        }
        for key in [
            "get secrets",
            "list deployments",
            "watch trustyaiservices",
            "get discovery",
            "post non-resource",
            "other secrets",
            // A verb is a whole word.
            "updates x",
        ] {
            assert!(!is_write(key), "{key}");
        }
    }

    #[test]
    fn total_sums_the_matching_keys() {
        let c = counts(&[
            ("get secrets", 3),
            ("patch trustyaiservices/status", 5),
            ("update leases", 7),
        ]);
        assert_eq!(total(&c, |_| true), 15);
        assert_eq!(total(&c, is_write), 12);
        assert_eq!(total(&c, |k| is_write(k) && !k.contains("leases")), 5);
        assert_eq!(total(&BTreeMap::new(), |_| true), 0);
    }

    #[test]
    fn difference_keeps_only_the_new_requests() {
        let before = counts(&[("get secrets", 3), ("update leases", 7), ("list pods", 1)]);
        let after = counts(&[
            ("get secrets", 3),
            ("update leases", 9),
            ("list pods", 1),
            ("create services", 2),
        ]);
        assert_eq!(
            difference(&after, &before),
            counts(&[("create services", 2), ("update leases", 2)])
        );
        assert_eq!(difference(&after, &BTreeMap::new()), after);
        assert!(difference(&before, &before).is_empty());
    }

    #[test]
    fn difference_of_a_smaller_count_is_nothing_not_a_panic() {
        let before = counts(&[("get secrets", 5)]);
        let after = counts(&[("get secrets", 2)]);
        assert!(difference(&after, &before).is_empty());
    }

    #[test]
    fn counts_snapshot_copies_the_map() {
        let counts = Counts::default();
        assert!(counts.snapshot().is_empty());
        if let Ok(mut m) = counts.0.lock() {
            *m.entry("get secrets".to_owned()).or_default() += 2;
        }
        let snapshot = counts.snapshot();
        if let Ok(mut m) = counts.0.lock() {
            *m.entry("get secrets".to_owned()).or_default() += 1;
        }
        assert_eq!(snapshot.get("get secrets"), Some(&2));
        assert_eq!(counts.snapshot().get("get secrets"), Some(&3));
    }

    #[test]
    fn kubeconfig_points_at_the_proxy_without_credentials() {
        let path = std::env::temp_dir().join(format!(
            "trustyai-bench-kubeconfig-test-{}",
            std::process::id()
        ));
        write_kubeconfig(&path, 41234).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let config = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(config.current_context.as_deref(), Some("proxy"));
        let cluster = config.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("http://127.0.0.1:41234"));
        let context = config.contexts[0].context.as_ref().unwrap();
        assert_eq!(context.cluster, "proxy");
        assert_eq!(context.user.as_deref(), Some("operator"));
        assert_eq!(context.namespace.as_deref(), Some("default"));
        // No credentials: the proxy adds the admin's.
        let user = config.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(user.token.is_none() && user.client_certificate_data.is_none());
    }
}
