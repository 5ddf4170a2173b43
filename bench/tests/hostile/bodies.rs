//! Bodies: an oversized one gets 413, duplicate keys are refused alike by every endpoint, and
//! the corpus fits the body limit.

use anyhow::{Context, Result};
use bytes::Bytes;
use serde_json::Value;
use trustyai_bench::client::Protocol;

use crate::support::{
    BODY_LIMIT, MIB, SPEC, Server, V1ALPHA1, admission, conversion, corpus, v1_object,
};

#[tokio::test]
async fn an_oversized_body_gets_413_on_both_protocols() -> Result<()> {
    let server = Server::start(&[])?;
    let body = Bytes::from(vec![b' '; BODY_LIMIT + MIB]);
    for protocol in [Protocol::Http1, Protocol::H2] {
        for _ in 0..5 {
            let connection = server.connect(protocol).await?;
            let (status, _) = connection
                .post("/validate", body.clone())
                .await
                .with_context(|| format!("{protocol:?}: no answer (connection reset?)"))?;
            assert_eq!(status, 413, "{protocol:?}");
        }
    }
    Ok(())
}

#[tokio::test]
async fn duplicate_keys_are_refused_alike_by_all_three_endpoints() -> Result<()> {
    let server = Server::start(&[])?;
    let connection = server.connect(Protocol::H2).await?;
    let object = v1_object(
        r#"{"storage":{"format":"PVC","format":"DATABASE"},"metrics":{"schedule":"5s"}}"#,
        "{}",
    );
    for (path, body) in [
        ("/validate", admission(&object)),
        ("/mutate", admission(&object)),
    ] {
        let (status, answer) = connection.post(path, Bytes::from(body)).await?;
        let answer: Value = serde_json::from_slice(&answer)?;
        assert_eq!(status, 200);
        assert_eq!(answer["response"]["allowed"], false, "{path}");
        let message = message_at(&answer, "/response/status/message");
        assert!(
            message.contains("request.object.spec.storage: duplicate key \"format\""),
            "{path}: {message}"
        );
    }
    let object = v1_object(SPEC, r#"{"image":"a","image":"b"}"#);
    let (status, answer) = connection
        .post("/convert", Bytes::from(conversion(&object, V1ALPHA1)))
        .await?;
    let answer: Value = serde_json::from_slice(&answer)?;
    assert_eq!(status, 200);
    let message = message_at(&answer, "/response/result/message");
    assert!(
        message.contains("request.objects.0.status: duplicate key \"image\""),
        "{message}"
    );
    Ok(())
}

/// The message at `pointer` in a review's answer (admission reviews answer in
/// `/response/status`, conversion reviews in `/response/result`); `""` when there is none.
fn message_at<'a>(answer: &'a Value, pointer: &str) -> &'a str {
    answer
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[test]
fn the_corpus_fits_the_body_limit() {
    for (name, _, body, _) in corpus() {
        assert!(body.len() <= BODY_LIMIT, "{name}: {}", body.len());
        assert!(
            body.len() > BODY_LIMIT / 2,
            "{name}: only {} bytes",
            body.len()
        );
    }
}
