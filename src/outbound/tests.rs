//! The client against real local servers (plain, TLS with a test CA, raw TCP), with a resolver
//! that maps test names to addresses.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::*;

/// Names to addresses; anything else does not resolve.
struct MapResolver(HashMap<String, Vec<IpAddr>>);

/// Counts the lookups of the resolver it wraps.
struct Counting(Arc<dyn Resolve>, Arc<AtomicUsize>);

impl Resolve for Counting {
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>> {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.resolve(host, port)
    }
}

impl Resolve for MapResolver {
    fn resolve<'a>(&'a self, host: &'a str, _port: u16) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>> {
        let found = self.0.get(host).cloned();
        Box::pin(async move { found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such name")) })
    }
}

const LOCAL: &[&str] = &["hooks.test", "other.test", "plain.test", "internal.test", "localhost.test"];

fn resolver(extra: &[(&str, &str)]) -> Arc<dyn Resolve> {
    let mut map: HashMap<String, Vec<IpAddr>> = LOCAL.iter().map(|n| (n.to_string(), vec![[127, 0, 0, 1].into()])).collect();
    map.insert("shop.test".into(), vec!["93.184.215.14".parse().unwrap()]);
    for (name, ip) in extra {
        map.entry(name.to_string()).or_default().push(ip.parse().unwrap());
    }
    Arc::new(MapResolver(map))
}

/// Short timeouts, though not so short that a busy machine trips them (the hanging-server test
/// sets its own).
fn config(allow: &[&str]) -> OutboundConfig {
    OutboundConfig {
        allow: allow.iter().map(|s| s.to_string()).collect(),
        connect_timeout: Duration::from_secs(2),
        total_timeout: Duration::from_secs(4),
        ..OutboundConfig::default()
    }
}

fn client(allow: &[&str]) -> Outbound {
    Outbound::new(config(allow), resolver(&[])).unwrap()
}

fn get(url: impl Into<String>, redirects: Redirects) -> OutboundRequest {
    OutboundRequest { method: Method::GET, url: url.into(), headers: Vec::new(), body: Bytes::new(), redirects }
}

type Handler = Arc<dyn Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync>;

fn reply(status: u16, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(body.into()));
    *res.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    res
}

fn redirect(status: u16, location: &str) -> Response<Full<Bytes>> {
    let mut res = reply(status, "");
    res.headers_mut().insert("location", location.parse().unwrap());
    res
}

/// Echoes what the client sent: method, Host, User-Agent, Content-Length and the path.
fn echo(req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let h = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or("-").to_string();
    reply(200, format!("{} {} {} {} {}", req.method(), h("host"), h("user-agent"), h("content-length"), req.uri()))
}

async fn serve_conn<S>(io: S, handler: Handler)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let res = handler(&req);
        async move { Ok::<_, Infallible>(res) }
    });
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(io), svc).await;
}

/// A plain HTTP server on 127.0.0.1; its port.
async fn http_server(handler: Handler) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(serve_conn(tcp, handler.clone()));
        }
    });
    port
}

/// A test CA, written as a PEM file, and a server certificate it signed for `hooks.test`.
struct TestPki {
    _dir: tempfile::TempDir,
    ca_file: std::path::PathBuf,
    server: Arc<rustls::ServerConfig>,
}

fn test_pki() -> TestPki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "shopcell test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["hooks.test".to_string()]).unwrap().signed_by(&leaf_key, &ca).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let chain: Vec<CertificateDer<'static>> = vec![leaf.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    TestPki { _dir: dir, ca_file, server: Arc::new(server) }
}

/// An HTTPS server on 127.0.0.1 presenting the `hooks.test` certificate; its port, and the server
/// names (SNI) its clients asked for.
async fn https_server_sni(pki: &TestPki, handler: Handler) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server.clone());
    let names = Arc::new(Mutex::new(Vec::new()));
    let seen = names.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, handler, seen) = (acceptor.clone(), handler.clone(), seen.clone());
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    seen.lock().unwrap().push(tls.get_ref().1.server_name().unwrap_or("-").to_string());
                    serve_conn(tls, handler).await;
                }
            });
        }
    });
    (port, names)
}

async fn https_server(pki: &TestPki, handler: Handler) -> u16 {
    https_server_sni(pki, handler).await.0
}

fn tls_client(pki: &TestPki, allow: &[&str]) -> Outbound {
    let config = OutboundConfig { ca_files: vec![pki.ca_file.clone()], ..config(allow) };
    Outbound::new(config, resolver(&[])).unwrap()
}

/// A raw TCP server: each connection gets `answer` written, then is held open.
async fn raw_server(answer: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let _ = tcp.write_all(&answer).await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });
    port
}

#[tokio::test]
async fn refused_addresses_and_odd_literals() {
    let cases: &[(&str, &str)] = &[
        ("169.254.169.254", "link-local"),
        ("::ffff:127.0.0.1", "loopback"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("0.0.0.0", "unspecified"),
        ("ff02::1", "multicast"),
        ("fd00::1", "private"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.0.1", "private"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("224.0.0.251", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("2002:a00:1::1", "private"),
    ];
    let extra: Vec<(String, &str)> = cases.iter().enumerate().map(|(i, (ip, _))| (format!("evil{i}.test"), *ip)).collect();
    let extra_ref: Vec<(&str, &str)> = extra.iter().map(|(n, ip)| (n.as_str(), *ip)).collect();
    let out = Outbound::new(config(&[]), resolver(&extra_ref)).unwrap();
    for (i, (ip, reason)) in cases.iter().enumerate() {
        let literal = if ip.contains(':') { format!("https://[{ip}]/hook") } else { format!("https://{ip}/hook") };
        match out.check_url(&literal).await {
            Err(OutboundError::Refused(m)) => assert!(m.contains(reason) && m.contains("the address"), "{literal}: {m}"),
            other => panic!("{literal}: {other:?}"),
        }
        let named = format!("https://evil{i}.test/hook");
        match out.check_url(&named).await {
            // A name's message does not tell what it resolved to.
            Err(OutboundError::Refused(m)) => assert!(m.contains(reason) && !m.contains(ip), "{named}: {m}"),
            other => panic!("{named}: {other:?}"),
        }
        let sent = out.send(get(&named, Redirects::None)).await;
        assert!(matches!(sent, Err(OutboundError::Refused(_))), "{named}: {sent:?}");
    }
    // Forms the URL parser normalises to an IPv4 address are judged as that address.
    for odd in ["https://2130706433/", "https://0x7f.1/", "https://0177.0.0.1/", "https://127.1/", "https://[::ffff:7f00:1]/"] {
        let e = out.check_url(odd).await.unwrap_err();
        assert!(matches!(&e, OutboundError::Refused(m) if m.contains("loopback")), "{odd}: {e:?}");
    }
    // One refused address among public ones refuses the name.
    let mixed = Outbound::new(config(&[]), resolver(&[("mixed.test", "8.8.8.8"), ("mixed.test", "10.1.1.1")])).unwrap();
    assert!(matches!(mixed.check_url("https://mixed.test/").await, Err(OutboundError::Refused(_))));
    // Public addresses pass.
    out.check_url("https://shop.test/hooks?x=1").await.unwrap();
    out.check_url("https://8.8.8.8/").await.unwrap();
    out.check_url("https://[2606:4700::1111]:8443/").await.unwrap();
}

#[tokio::test]
async fn url_form_rules() {
    let out = client(&[]);
    let refused = out.check_url("http://shop.test/").await.unwrap_err();
    assert_eq!(refused, OutboundError::Refused("the URL must use https".into()));
    for creds in ["https://u:p@shop.test/", "https://u@shop.test/", "https://:p@shop.test/"] {
        let e = out.check_url(creds).await.unwrap_err();
        assert!(matches!(&e, OutboundError::InvalidUrl(m) if m.contains("password")), "{creds}: {e:?}");
    }
    let base = "https://shop.test/";
    let exact = format!("{base}{}", "a".repeat(MAX_URL_LEN - base.len()));
    out.check_url(&exact).await.unwrap();
    let long = format!("{exact}a");
    assert!(matches!(out.check_url(&long).await, Err(OutboundError::InvalidUrl(m)) if m.contains("2048")));
    for bad in ["", "shop.test/hook", "/hook", "ftp://shop.test/", "https://", "file:///etc/passwd", "https://exa mple.test/"] {
        assert!(matches!(out.check_url(bad).await, Err(OutboundError::InvalidUrl(_))), "{bad:?}");
    }
    let unresolved = out.check_url("https://nowhere.test/").await.unwrap_err();
    assert_eq!(unresolved, OutboundError::Resolve("the host nowhere.test could not be resolved".into()));
    assert_eq!(unresolved.to_string(), "the host nowhere.test could not be resolved");
}

#[tokio::test]
async fn allow_list_is_exact_host_and_port() {
    let port = http_server(Arc::new(echo)).await;
    let out = client(&["hooks.test", &format!("plain.test:{port}")]);
    // Without a port: any port, http too, the loopback address allowed.
    out.check_url(&format!("http://hooks.test:{port}/")).await.unwrap();
    out.check_url("http://Hooks.Test:1/").await.unwrap();
    let res = out.send(get(format!("http://hooks.test:{port}/x?y=1"), Redirects::None)).await.unwrap();
    assert_eq!(res.status, 200);
    assert_eq!(res.body, format!("GET hooks.test:{port} shopcell - /x?y=1"));
    // With a port: that port only.
    out.check_url(&format!("http://plain.test:{port}/")).await.unwrap();
    let other_port = port.wrapping_add(1).max(1);
    assert!(matches!(out.check_url(&format!("http://plain.test:{other_port}/")).await, Err(OutboundError::Refused(_))));
    assert!(matches!(out.check_url(&format!("https://plain.test:{other_port}/")).await, Err(OutboundError::Refused(_))));
    // Not a suffix match, and other loopback names stay refused.
    assert!(matches!(out.check_url("https://sub.hooks.test/").await, Err(OutboundError::Resolve(_))));
    assert!(matches!(out.check_url(&format!("https://internal.test:{port}/")).await, Err(OutboundError::Refused(_))));
    // An allow-listed name still has to resolve.
    let nowhere = client(&["nowhere.test"]);
    assert!(matches!(nowhere.check_url("http://nowhere.test/").await, Err(OutboundError::Resolve(_))));
    // An allow-listed IP literal.
    let literal = client(&[&format!("127.0.0.1:{port}")]);
    assert_eq!(literal.send(get(format!("http://127.0.0.1:{port}/"), Redirects::None)).await.unwrap().status, 200);
}

#[tokio::test]
async fn bad_settings_are_named() {
    let e = Outbound::new(config(&["ok.test", "bad.test:port"]), resolver(&[])).err().unwrap();
    assert!(e.contains("bad.test:port"), "{e}");
    let missing = OutboundConfig { ca_files: vec!["/nonexistent/ca.pem".into()], ..config(&[]) };
    let e = Outbound::new(missing, resolver(&[])).err().unwrap();
    assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate").unwrap();
    let e = Outbound::new(OutboundConfig { ca_files: vec![empty], ..config(&[]) }, resolver(&[])).err().unwrap();
    assert!(e.contains("empty.pem"), "{e}");
}

#[tokio::test]
async fn tls_verifies_the_name_against_the_test_ca() {
    let pki = test_pki();
    let (port, sni) = https_server_sni(&pki, Arc::new(echo)).await;
    let out = tls_client(&pki, &["hooks.test", "other.test"]);
    let mut post = get(format!("https://hooks.test:{port}/deliver"), Redirects::None);
    post.method = Method::POST;
    post.body = Bytes::from_static(b"{\"event\":1}");
    post.headers = vec![("content-type".into(), "application/json".into()), ("content-length".into(), "999".into())];
    let res = out.send(post).await.unwrap();
    assert_eq!(res.status, 200);
    assert_eq!(res.body, format!("POST hooks.test:{port} shopcell 11 /deliver"));
    assert!(res.elapsed < Duration::from_secs(5));
    // Connected to the resolved address, the name still in the handshake.
    assert_eq!(*sni.lock().unwrap(), ["hooks.test"]);
    // The same server under a name its certificate does not carry.
    let e = out.send(get(format!("https://other.test:{port}/"), Redirects::None)).await.unwrap_err();
    assert!(matches!(&e, OutboundError::Tls(m) if m.contains("other.test")), "{e:?}");
    // Without the CA file the certificate is not trusted.
    let untrusted = client(&["hooks.test"]);
    let e = untrusted.send(get(format!("https://hooks.test:{port}/"), Redirects::None)).await.unwrap_err();
    assert!(matches!(e, OutboundError::Tls(_)), "{e:?}");
}

#[tokio::test]
async fn a_hanging_server_times_out() {
    let port = raw_server(Vec::new()).await;
    let short = OutboundConfig { total_timeout: Duration::from_millis(300), ..config(&["hooks.test"]) };
    let out = Outbound::new(short, resolver(&[])).unwrap();
    let start = Instant::now();
    let e = out.send(get(format!("http://hooks.test:{port}/"), Redirects::None)).await.unwrap_err();
    assert_eq!(e, OutboundError::Timeout);
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(2), "{waited:?}");
    // A body that starts and then stalls is cut by the same total timeout.
    let port = raw_server(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc".to_vec()).await;
    let e = out.send(get(format!("http://hooks.test:{port}/"), Redirects::None)).await.unwrap_err();
    assert_eq!(e, OutboundError::Timeout);
    // Nobody listening: a connect error, not a wait.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let e = out.send(get(format!("http://hooks.test:{closed}/"), Redirects::None)).await.unwrap_err();
    assert!(matches!(e, OutboundError::Connect(_)), "{e:?}");
}

#[tokio::test]
async fn answers_over_the_cap_are_too_large() {
    let big = Bytes::from(vec![b'x'; 5 * 1024 * 1024]);
    let port = http_server(Arc::new(move |req: &Request<Incoming>| match req.uri().path() {
        "/exact" => reply(200, vec![b'y'; 1024 * 1024]),
        _ => reply(200, big.clone()),
    }))
    .await;
    let out = client(&["hooks.test"]);
    let e = out.send(get(format!("http://hooks.test:{port}/big"), Redirects::None)).await.unwrap_err();
    assert_eq!(e, OutboundError::TooLarge);
    let res = out.send(get(format!("http://hooks.test:{port}/exact"), Redirects::None)).await.unwrap();
    assert_eq!(res.body.len(), 1024 * 1024);
    // A HEAD answer announces the length of a body it does not carry.
    let head = OutboundRequest { method: Method::HEAD, ..get(format!("http://hooks.test:{port}/big"), Redirects::None) };
    let res = out.send(head).await.unwrap();
    assert_eq!((res.status, res.body.len()), (200, 0));
    // Chunked, no length announced: the reading stops at the cap.
    let mut chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..80 {
        chunked.extend_from_slice(format!("{:x}\r\n", 65536).as_bytes());
        chunked.extend_from_slice(&[b'z'; 65536]);
        chunked.extend_from_slice(b"\r\n");
    }
    let port = raw_server(chunked).await;
    let e = out.send(get(format!("http://hooks.test:{port}/"), Redirects::None)).await.unwrap_err();
    assert_eq!(e, OutboundError::TooLarge);
}

fn redirecting(req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["start", "here"] => redirect(302, "next"),
        ["start", "next"] => reply(200, format!("final {}", req.method())),
        // /chain/K/n redirects to n+1 until n reaches K.
        ["chain", k, n] => {
            let (k, n): (u32, u32) = (k.parse().unwrap(), n.parse().unwrap());
            if n < k { redirect(307, &format!("/chain/{k}/{}", n + 1)) } else { reply(200, format!("after {n}")) }
        }
        ["see-other"] => redirect(303, "/start/next"),
        ["to"] => redirect(302, req.uri().query().unwrap_or("")),
        _ => echo(req),
    }
}

#[tokio::test]
async fn one_lookup_per_hop() {
    let port = http_server(Arc::new(redirecting)).await;
    let lookups = Arc::new(AtomicUsize::new(0));
    let out = Outbound::new(config(&["hooks.test"]), Arc::new(Counting(resolver(&[]), lookups.clone()))).unwrap();
    out.send(get(format!("http://hooks.test:{port}/"), Redirects::None)).await.unwrap();
    assert_eq!(lookups.load(Ordering::SeqCst), 1);
    out.send(get(format!("http://hooks.test:{port}/chain/2/0"), Redirects::Follow(5))).await.unwrap();
    assert_eq!(lookups.load(Ordering::SeqCst), 4);
    // An IP literal is not looked up.
    let literal =
        Outbound::new(config(&[&format!("127.0.0.1:{port}")]), Arc::new(Counting(resolver(&[]), lookups.clone()))).unwrap();
    literal.send(get(format!("http://127.0.0.1:{port}/"), Redirects::None)).await.unwrap();
    assert_eq!(lookups.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn redirects_none_returns_the_3xx() {
    let port = http_server(Arc::new(redirecting)).await;
    let out = client(&["hooks.test"]);
    let res = out.send(get(format!("http://hooks.test:{port}/start/here"), Redirects::None)).await.unwrap();
    assert_eq!(res.status, 302);
    assert_eq!(res.headers.get("location").unwrap(), "next");
}

#[tokio::test]
async fn redirects_are_followed_and_checked() {
    let port = http_server(Arc::new(redirecting)).await;
    let out = client(&["hooks.test"]);
    let url = |path: &str| format!("http://hooks.test:{port}{path}");
    let res = out.send(get(url("/start/here"), Redirects::Follow(5))).await.unwrap();
    assert_eq!((res.status, res.body), (200, Bytes::from("final GET")));
    // Exactly five hops pass; a sixth is refused, also when more are asked for.
    let res = out.send(get(url("/chain/5/0"), Redirects::Follow(5))).await.unwrap();
    assert_eq!(res.body, "after 5");
    for follow in [5, 200] {
        let e = out.send(get(url("/chain/6/0"), Redirects::Follow(follow))).await.unwrap_err();
        assert!(matches!(&e, OutboundError::Redirect(m) if m.contains("5 redirects")), "{e:?}");
    }
    let e = out.send(get(url("/chain/2/0"), Redirects::Follow(1))).await.unwrap_err();
    assert!(matches!(e, OutboundError::Redirect(_)), "{e:?}");
    // A 303 after a POST is a GET.
    let mut post = get(url("/see-other"), Redirects::Follow(5));
    post.method = Method::POST;
    post.body = Bytes::from_static(b"payload");
    assert_eq!(out.send(post).await.unwrap().body, "final GET");
    // To a loopback name that is not allow-listed: refused, over https as over http.
    for to in [format!("https://internal.test:{port}/"), format!("http://internal.test:{port}/"), "https://[::1]/".into()] {
        let e = out.send(get(url(&format!("/to?{to}")), Redirects::Follow(5))).await.unwrap_err();
        assert!(matches!(e, OutboundError::Refused(_)), "{to}: {e:?}");
    }
    // With credentials, or not a URL.
    let e = out.send(get(url("/to?https://u:p@shop.test/"), Redirects::Follow(5))).await.unwrap_err();
    assert!(matches!(e, OutboundError::InvalidUrl(_)), "{e:?}");
    let e = out.send(get(url("/to?http://[::1"), Redirects::Follow(5))).await.unwrap_err();
    assert!(matches!(e, OutboundError::Redirect(_)), "{e:?}");
}

#[tokio::test]
async fn redirects_never_go_from_https_to_http() {
    let pki = test_pki();
    let plain = http_server(Arc::new(redirecting)).await;
    let port = https_server(&pki, Arc::new(redirecting)).await;
    let out = tls_client(&pki, &["hooks.test", "plain.test"]);
    let res = out.send(get(format!("https://hooks.test:{port}/start/here"), Redirects::Follow(5))).await.unwrap();
    assert_eq!(res.body, "final GET");
    let to = format!("http://plain.test:{plain}/start/next");
    let e = out.send(get(format!("https://hooks.test:{port}/to?{to}"), Redirects::Follow(5))).await.unwrap_err();
    assert!(matches!(&e, OutboundError::Redirect(m) if m.contains("https")), "{e:?}");
    // The same hop is fine from http.
    let res = out.send(get(format!("http://plain.test:{plain}/to?{to}"), Redirects::Follow(5))).await.unwrap();
    assert_eq!(res.body, "final GET");
}

#[test]
fn messages_are_short_sentences() {
    let e = OutboundError::Refused("the host a.test resolves to an address that is private".into());
    assert_eq!(e.to_string(), "the host a.test resolves to an address that is private");
    assert_eq!(OutboundError::Timeout.to_string(), "the server did not answer in time");
}

#[test]
fn flags_make_the_config() {
    use clap::Parser;
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        outbound: crate::cli::OutboundArgs,
    }
    let parse = |args: &[&str]| Flags::try_parse_from([&["shopcell"], args].concat()).map(|f| f.outbound.config());
    let default = parse(&[]).unwrap();
    assert_eq!(default.connect_timeout, Duration::from_secs(5));
    assert_eq!(default.total_timeout, Duration::from_secs(15));
    assert_eq!(default.max_response_bytes, 1024 * 1024);
    assert_eq!(crate::cli::OutboundArgs::default().config().total_timeout, Duration::from_secs(15));
    let c = parse(&[
        "--outbound-allow",
        "a.test,b.test:8080",
        "--outbound-allow",
        "c.test",
        "--outbound-ca",
        "one.pem",
        "--outbound-ca",
        "two.pem",
        "--outbound-connect-timeout",
        "300ms",
        "--outbound-timeout",
        "2s",
        "--outbound-max-response",
        "4096",
    ])
    .unwrap();
    assert_eq!(c.allow, ["a.test", "b.test:8080", "c.test"]);
    assert_eq!(c.ca_files, [std::path::PathBuf::from("one.pem"), "two.pem".into()]);
    assert_eq!(
        (c.connect_timeout, c.total_timeout, c.max_response_bytes),
        (Duration::from_millis(300), Duration::from_secs(2), 4096)
    );
    assert!(parse(&["--outbound-timeout", "soon"]).is_err());
}

#[test]
fn the_client_and_its_calls_can_move_between_tasks() {
    fn send_sync<T: Send + Sync + Clone + 'static>(_: &T) {}
    fn send<T: Send + 'static>(_: T) {}
    let out = client(&[]);
    send_sync(&out);
    let (a, b) = (out.clone(), out.clone());
    send(async move { a.send(get("https://shop.test/", Redirects::None)).await });
    send(async move { b.check_url("https://shop.test/").await });
    assert!(format!("{out:?}").starts_with("Outbound"));
}
