//! A client of a TrustyAI service's API as its users call it: through `<cr>-tls` (kube-rbac-proxy,
//! which reviews the caller's token and asks the API server whether it may act on
//! `services/<cr>`), with a ServiceAccount's token, trusting the CA in the `<cr>-tls` Secret.

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio_rustls::TlsConnector;
use trustyai_local_cluster::ControlPlane;

use super::release::TIMEOUT;
use super::service::pvc_service;
use crate::support::cluster::tls_connector;
use crate::support::{https, wait};

/// The service's API behind `<cr>-tls`.
pub struct ServiceApi {
    connector: TlsConnector,
    address: String,
    server_name: String,
}

impl ServiceApi {
    /// The API of the TrustyAIService `cr` in `ns`, once its Service and Secret exist.
    pub async fn of(client: &kube::Client, ns: &str, cr: &str) -> ServiceApi {
        let name = format!("{cr}-tls");
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        let ca = wait::until(&format!("ca.crt in Secret {name}"), TIMEOUT, async || {
            secrets.get(&name).await.ok()?.data?.get("ca.crt").cloned()
        })
        .await;
        let services: Api<Service> = Api::namespaced(client.clone(), ns);
        let ip = wait::until(&format!("Service {name}'s address"), TIMEOUT, async || {
            services.get(&name).await.ok()?.spec?.cluster_ip
        })
        .await;
        ServiceApi {
            connector: tls_connector(&ca.0),
            address: format!("{ip}:443"),
            server_name: format!("{name}.{ns}.svc"),
        }
    }

    /// One request with `token` as the bearer.
    pub async fn call(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), String> {
        let bearer = format!("Bearer {token}");
        https::request(
            &self.connector,
            &self.address,
            &self.server_name,
            method,
            path,
            &[("Authorization", &bearer)],
            body,
        )
        .await
    }

    /// Waits until a request of `token` gets an answer (any status): kube-proxy routes the
    /// Service to a Ready pod a moment after the pod is Ready.
    pub async fn wait_reachable(&self, token: &str) {
        wait::until(
            &format!("an answer from {}", self.server_name),
            TIMEOUT,
            async || self.call(token, "GET", "/info", None).await.ok(),
        )
        .await;
    }
}

/// A ServiceAccount `name` in `ns` whose Role grants `verbs` on `services/<service>` only;
/// returns a token of it.
pub async fn caller(
    client: &kube::Client,
    ns: &str,
    name: &str,
    verbs: &[&str],
    service: &str,
) -> String {
    let params = PostParams::default();
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("a ServiceAccount");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    accounts.create(&params, &account).await.expect("created");
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["services"],
                   "resourceNames": [service], "verbs": verbs}],
    }))
    .expect("a Role");
    Api::<Role>::namespaced(client.clone(), ns)
        .create(&params, &role)
        .await
        .expect("created");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
    }))
    .expect("a RoleBinding");
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&params, &binding)
        .await
        .expect("created");
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": []}})).expect("a TokenRequest");
    accounts
        .create_token_request(name, &params, &request)
        .await
        .expect("a token")
        .status
        .expect("its status")
        .token
        .expect("the token")
}

/// The model the reference conversation uploads.
pub const MODEL: &str = "demo-model";

/// 20 inferences of [`MODEL`]: 10 with `gender` 1 (8 of them `income` 1) and 10 with `gender`
/// 0 (5 of them `income` 1).
pub fn upload_body() -> Value {
    let gender: Vec<i32> = (0..20).map(|i| i32::from(i < 10)).collect();
    let age: Vec<f64> = (0..20).map(|i| 25.0 + f64::from(i)).collect();
    let income = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0];
    json!({
        "model_name": MODEL,
        "data_tag": "TRAINING",
        "is_ground_truth": false,
        "request": {"inputs": [
            {"name": "gender", "shape": [20], "datatype": "INT32", "data": gender},
            {"name": "age", "shape": [20], "datatype": "FP32", "data": age},
        ]},
        "response": {"model_name": MODEL, "outputs": [
            {"name": "income", "shape": [20], "datatype": "INT32", "data": income},
        ]},
    })
}

/// The statistical parity difference of `income` between `gender` 0 and 1 over the upload:
/// 5/10 − 8/10 = −0.3.
pub const EXPECTED_SPD: f64 = -0.3;

/// A request for that SPD.
pub fn spd_body() -> Value {
    json!({
        "modelId": MODEL, "protectedAttribute": "gender", "outcomeName": "income",
        "privilegedAttribute": 1, "unprivilegedAttribute": 0, "favorableOutcome": 1,
        "batchSize": 100, "requestName": "demo-spd",
    })
}

/// Asserts the answer is 200 and an SPD of [`EXPECTED_SPD`].
pub fn assert_spd(answer: &(u16, Value)) {
    let (status, body) = answer;
    assert_eq!(*status, 200, "{body}");
    assert_eq!(body["name"], "SPD", "{body}");
    let value = body["value"].as_f64().unwrap_or(f64::NAN);
    assert!((value - EXPECTED_SPD).abs() < 1e-9, "{body}");
}

/// The PVC-mode TrustyAIService `demo` in `ns` once Ready ([`pvc_service`]) and its [`User`],
/// who has uploaded [`upload_body`]: where the tests of the data on a claim start. Returns the
/// Ready pod and the user.
pub async fn uploaded_pvc_demo(cp: &ControlPlane, client: &kube::Client, ns: &str) -> (Pod, User) {
    let pod = pvc_service(cp, client, ns, "demo").await;
    let user = User::of_demo(client, ns).await;
    user.upload().await;
    (pod, user)
}

/// A user of the TrustyAIService `demo`'s API: a ServiceAccount `user` with `get` on its
/// Service, and the API once it answers.
pub struct User {
    pub api: ServiceApi,
    pub token: String,
}

impl User {
    /// Makes the user in `ns` and waits until the API answers it.
    pub async fn of_demo(client: &kube::Client, ns: &str) -> User {
        let token = caller(client, ns, "user", &["get"], "demo").await;
        let api = ServiceApi::of(client, ns, "demo").await;
        api.wait_reachable(&token).await;
        User { api, token }
    }

    /// `POST path` with `body`, asserting a 200; returns the answer's body.
    pub async fn post(&self, path: &str, body: &Value) -> Value {
        let (code, answer) = self
            .api
            .call(&self.token, "POST", path, Some(body))
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        assert_eq!(code, 200, "POST {path}: {answer}");
        answer
    }

    /// Uploads the 20 inferences of [`upload_body`].
    pub async fn upload(&self) {
        self.post("/data/upload", &upload_body()).await;
    }

    /// Asserts that the SPD over the uploaded inferences is [`EXPECTED_SPD`] (after waiting for
    /// the API to answer again, as after a pod's replacement).
    pub async fn assert_spd(&self) {
        self.api.wait_reachable(&self.token).await;
        let answer = self
            .api
            .call(
                &self.token,
                "POST",
                "/metrics/group/fairness/spd",
                Some(&spd_body()),
            )
            .await;
        assert_spd(&answer.unwrap_or_else(|e| panic!("SPD: {e}")));
    }
}
