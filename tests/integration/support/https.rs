//! A minimal HTTP/1.1 client over the tests' own TLS connectors: one request per connection
//! (`Connection: close`), the answer's status and body (JSON where it parses, else the text).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// How long an answer may take to arrive in full.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A TLS connection to `address`, the server's certificate checked for `server_name`.
pub async fn connect(
    connector: &TlsConnector,
    address: &str,
    server_name: &str,
) -> Result<TlsStream<TcpStream>, String> {
    let tcp = TcpStream::connect(address)
        .await
        .map_err(|e| format!("connect to {address}: {e}"))?;
    let name = rustls::pki_types::ServerName::try_from(server_name.to_owned())
        .map_err(|e| format!("server name {server_name}: {e}"))?;
    connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake with {address} as {server_name}: {e}"))
}

/// One request: `method path` with `headers` and, if given, a JSON `body`.
pub async fn request(
    connector: &TlsConnector,
    address: &str,
    server_name: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Result<(u16, Value), String> {
    let mut stream = connect(connector, address, server_name).await?;
    let body = body.map(|b| serde_json::to_vec(b).expect("json"));
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {server_name}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = &body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend(body.unwrap_or_default());
    stream
        .write_all(&bytes)
        .await
        .map_err(|e| format!("write: {e}"))?;
    read_answer(&mut stream).await
}

/// Reads one HTTP/1.1 answer and returns its status and body.
pub async fn read_answer(stream: &mut TlsStream<TcpStream>) -> Result<(u16, Value), String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(answer) = parse_answer(&buf, false)? {
            return Ok(answer);
        }
        match tokio::time::timeout(ANSWER_TIMEOUT, stream.read(&mut chunk)).await {
            Err(_) => return Err(format!("no complete answer within {ANSWER_TIMEOUT:?}")),
            // A server may close a TLS stream without close_notify after `Connection: close`.
            Ok(Ok(0)) | Ok(Err(_)) if !buf.is_empty() => {
                return parse_answer(&buf, true)?.ok_or_else(|| {
                    format!(
                        "connection closed after {} bytes of the answer: {}",
                        buf.len(),
                        String::from_utf8_lossy(&buf)
                    )
                });
            }
            Ok(Ok(0)) => return Err("connection closed before an answer".into()),
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Ok(Err(e)) => return Err(format!("reading the answer: {e}")),
        }
    }
}

/// A complete answer in `buf` (with a Content-Length, chunked, or up to the end of the stream
/// once `ended`), `None` while incomplete.
pub fn parse_answer(buf: &[u8], ended: bool) -> Result<Option<(u16, Value)>, String> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line: {head}"))?;
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    };
    let rest = &buf[end + 4..];
    let body = if let Some(length) = header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| format!("bad Content-Length: {head}"))?;
        if rest.len() < length {
            return Ok(None);
        }
        rest[..length].to_vec()
    } else if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        match dechunk(rest)? {
            Some(body) => body,
            None => return Ok(None),
        }
    } else if ended {
        rest.to_vec()
    } else {
        return Ok(None);
    };
    let value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).to_string()));
    Ok(Some((status, value)))
}

/// The body of a chunked transfer once its last chunk is in `rest`.
fn dechunk(mut rest: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_text = String::from_utf8_lossy(&rest[..line_end]).to_string();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        let data = &rest[line_end + 2..];
        if size == 0 {
            return Ok(Some(body));
        }
        if data.len() < size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&data[..size]);
        rest = &data[size + 2..];
    }
}

#[test]
fn answers_with_a_length_chunked_or_up_to_the_end_are_read() {
    let sized = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
    assert_eq!(
        parse_answer(sized, false),
        Ok(Some((200, serde_json::json!({"a": 1}))))
    );
    let chunked = b"HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nFor\n\r\n3\r\nbid\r\n0\r\n\r\n";
    assert_eq!(
        parse_answer(chunked, false),
        Ok(Some((403, Value::String("For\nbid".into()))))
    );
    assert_eq!(parse_answer(&chunked[..60], false), Ok(None));
    let open = b"HTTP/1.1 200 OK\r\n\r\nhello";
    assert_eq!(parse_answer(open, false), Ok(None));
    assert_eq!(
        parse_answer(open, true),
        Ok(Some((200, Value::String("hello".into()))))
    );
}
