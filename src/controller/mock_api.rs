//! A scripted API server for unit tests, in the manner of kube-rs's controller-rs: a
//! [`kube::Client`] whose requests go to a list of expected steps instead of a cluster.
//!
//! Each request must match the next step (method and path prefix) and gets that step's
//! answer; anything else is answered 500 and fails the test when the [`MockApi`] is dropped,
//! so a test states exactly which requests a reconcile may make. Events (Events API writes)
//! are advisory and made along the way, so they are answered without a step and kept apart
//! for the assertions on their reason and note.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

/// One request the code under test made.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The HTTP method.
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    /// The query string (empty when none).
    pub query: String,
    /// The body, when it was JSON.
    pub body: Option<Value>,
}

impl std::fmt::Display for Recorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

#[derive(Debug)]
enum Answer {
    /// This status and body.
    Json(StatusCode, Value),
    /// The request body with what the API server adds to a written object: a server-side
    /// apply's answer.
    Echo,
}

/// An expected request and its answer.
#[derive(Debug)]
pub struct Expected {
    method: Method,
    path: String,
    answer: Answer,
}

impl Expected {
    /// Whether `path` is this step's: the same path, or one under it when the step's ends
    /// with `/` (so `.../services/tas` does not take `.../services/tas-tls`).
    fn matches(&self, path: &str) -> bool {
        path == self.path || (self.path.ends_with('/') && path.starts_with(&self.path))
    }

    /// `method` on `path` (or under it, see [`Self::matches`]), answered `status` with `body`.
    pub fn answer(method: Method, path: &str, status: u16, body: Value) -> Self {
        Self {
            method,
            path: path.to_owned(),
            answer: Answer::Json(
                StatusCode::from_u16(status).expect("a valid status code"),
                body,
            ),
        }
    }

    /// A server-side apply of `path`, answered with the applied object at a new
    /// resourceVersion.
    pub fn apply(path: &str) -> Self {
        Self {
            method: Method::PATCH,
            path: path.to_owned(),
            answer: Answer::Echo,
        }
    }

    /// A server-side apply of `path` refused with `status`.
    pub fn apply_refused(path: &str, status: u16, reason: &str, message: &str) -> Self {
        Self::refused(Method::PATCH, path, status, reason, message)
    }

    /// `method` on `path` refused with `status`, `reason` and `message` (the API server's
    /// `Status` body).
    pub fn refused(method: Method, path: &str, status: u16, reason: &str, message: &str) -> Self {
        Self::answer(method, path, status, failure(status, reason, message))
    }

    /// `method` on `path` (a create or a replace), answered with the object written at a new
    /// resourceVersion.
    pub fn write(method: Method, path: &str) -> Self {
        Self {
            method,
            path: path.to_owned(),
            answer: Answer::Echo,
        }
    }

    /// A GET of `path` answered with `object`.
    pub fn get(path: &str, object: Value) -> Self {
        Self::answer(Method::GET, path, 200, object)
    }

    /// A GET of `path` answered 404.
    pub fn get_absent(path: &str) -> Self {
        Self::answer(
            Method::GET,
            path,
            404,
            failure(404, "NotFound", "not found"),
        )
    }

    /// A DELETE of `path`, answered with success.
    pub fn delete(path: &str) -> Self {
        Self::answer(
            Method::DELETE,
            path,
            200,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
        )
    }
}

/// The API server's `Status` body of a failure.
pub fn failure(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": reason, "message": message, "code": code
    })
}

#[derive(Debug, Default)]
struct State {
    steps: VecDeque<Expected>,
    requests: Vec<Recorded>,
    events: Vec<Value>,
    unexpected: Vec<String>,
    /// The last resourceVersion handed out; it starts above those the tests' fixtures carry,
    /// as a write's revision is always above what was read before it.
    resource_version: u64,
}

/// Where the written objects' resourceVersions start.
const FIRST_WRITE_REVISION: u64 = 1000;

impl State {
    fn answer(&mut self, request: Recorded) -> (StatusCode, Value) {
        if is_event(&request.path) {
            let body = request.body.clone().unwrap_or_default();
            self.events.push(body.clone());
            let status = if request.method == Method::POST {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            return (status, body);
        }
        self.requests.push(request.clone());
        let expected = self
            .steps
            .front()
            .is_some_and(|s| s.method == request.method && s.matches(&request.path));
        if !expected {
            let next = self.steps.front().map_or_else(
                || "nothing".to_owned(),
                |s| format!("{} {}", s.method, s.path),
            );
            let message = format!("unexpected request {request} (expected {next})");
            self.unexpected.push(message.clone());
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                failure(500, "InternalError", &message),
            );
        }
        let step = self.steps.pop_front().expect("checked above");
        match step.answer {
            Answer::Json(status, body) => (status, body),
            Answer::Echo => {
                self.resource_version += 1;
                let mut object = request.body.unwrap_or_default();
                let meta = &mut object["metadata"];
                meta["resourceVersion"] = json!(self.resource_version.to_string());
                if meta.get("uid").is_none() {
                    meta["uid"] = json!(format!("uid-{}", self.resource_version));
                }
                meta["generation"] = json!(1);
                // As the API server records a server-side apply (the apply's query names its
                // field manager and forces).
                if request.method == Method::PATCH
                    && request.query.contains("force=true")
                    && let Some(manager) = request
                        .query
                        .split('&')
                        .find_map(|p| p.strip_prefix("fieldManager="))
                {
                    meta["managedFields"] = json!([{"manager": manager, "operation": "Apply"}]);
                }
                (StatusCode::OK, object)
            }
        }
    }
}

/// Whether `path` is the Events API's collection or one of its events (a series is a PATCH).
fn is_event(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    matches!(
        segments.as_slice(),
        [
            "",
            "apis",
            "events.k8s.io",
            "v1",
            "namespaces",
            _,
            "events",
            ..
        ]
    )
}

/// The scripted API server; dropping it fails the test if a request was unexpected or an
/// expected one was not made.
#[derive(Debug)]
pub struct MockApi {
    state: Arc<Mutex<State>>,
}

impl MockApi {
    /// A server expecting `steps`, and a client of it.
    pub fn new(steps: impl IntoIterator<Item = Expected>) -> (Self, kube::Client) {
        let state = Arc::new(Mutex::new(State {
            steps: steps.into_iter().collect(),
            resource_version: FIRST_WRITE_REVISION,
            ..State::default()
        }));
        let shared = state.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let state = shared.clone();
            async move {
                let (parts, body) = request.into_parts();
                let bytes = body.collect_bytes().await.expect("a request body");
                let recorded = Recorded {
                    method: parts.method,
                    path: parts.uri.path().to_owned(),
                    query: parts.uri.query().unwrap_or_default().to_owned(),
                    body: serde_json::from_slice(&bytes).ok(),
                };
                let (status, body) = lock(&state).answer(recorded);
                let body = serde_json::to_vec(&body).expect("JSON");
                let response = Response::builder()
                    .status(status)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Body::from(body))
                    .expect("a response");
                Ok::<_, Infallible>(response)
            }
        });
        (Self { state }, kube::Client::new(service, "default"))
    }

    /// The requests made so far, events aside.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.state).requests.clone()
    }

    /// The requests made so far, as `METHOD path`, events aside.
    pub fn calls(&self) -> Vec<String> {
        self.requests().iter().map(ToString::to_string).collect()
    }

    /// Forgets the requests and events made so far.
    pub fn clear(&self) {
        let mut state = lock(&self.state);
        state.requests.clear();
        state.events.clear();
    }

    /// The events written so far.
    pub fn events(&self) -> Vec<Value> {
        lock(&self.state).events.clone()
    }

    /// The reason and note of every event written so far.
    pub fn event_notes(&self) -> Vec<(String, String)> {
        self.events()
            .iter()
            .map(|e| {
                let text = |key: &str| e[key].as_str().unwrap_or_default().to_owned();
                (text("reason"), text("note"))
            })
            .collect()
    }
}

impl Drop for MockApi {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let state = lock(&self.state);
        assert!(
            state.unexpected.is_empty(),
            "the mock API server got unexpected requests: {:#?}",
            state.unexpected
        );
        let left: Vec<String> = state
            .steps
            .iter()
            .map(|s| format!("{} {}", s.method, s.path))
            .collect();
        assert!(left.is_empty(), "expected requests never made: {left:#?}");
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;

    use super::*;

    const PATH: &str = "/api/v1/namespaces/ns/configmaps/a";

    async fn get(client: kube::Client, name: &str) -> Result<ConfigMap, kube::Error> {
        Api::<ConfigMap>::namespaced(client, "ns").get(name).await
    }

    #[tokio::test]
    async fn answers_the_scripted_request() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let (api, client) = MockApi::new([Expected::get(PATH, object)]);
        let found = get(client, "a").await.expect("answered");
        assert_eq!(found.metadata.name.as_deref(), Some("a"));
        assert_eq!(api.calls(), vec![format!("GET {PATH}")]);
    }

    #[tokio::test]
    #[should_panic(expected = "unexpected requests")]
    async fn an_unexpected_request_fails_the_test() {
        let (_api, client) = MockApi::new([]);
        let error = get(client, "a").await.expect_err("answered 500");
        assert!(
            error.to_string().contains("unexpected request GET"),
            "{error}"
        );
    }

    #[tokio::test]
    #[should_panic(expected = "expected requests never made")]
    async fn a_request_not_made_fails_the_test() {
        let (_api, _client) = MockApi::new([Expected::get_absent(PATH)]);
    }

    #[test]
    fn a_step_takes_its_path_or_what_is_under_a_prefix() {
        let step = |path| Expected::get_absent(path);
        assert!(step(PATH).matches(PATH));
        assert!(!step("/api/v1/namespaces/ns/configmaps/").matches("/api/v1/namespaces/ns"));
        assert!(step("/api/v1/namespaces/ns/configmaps/").matches(PATH));
        assert!(!step("/api/v1/namespaces/ns/configmaps/a").matches(&format!("{PATH}-b")));
        assert!(is_event("/apis/events.k8s.io/v1/namespaces/ns/events"));
        assert!(is_event("/apis/events.k8s.io/v1/namespaces/ns/events/e.1"));
        assert!(!is_event("/apis/events.k8s.io/v1/namespaces/ns/other"));
    }
}
