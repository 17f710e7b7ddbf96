//! Optional TLS for the API listener (`APP_TLS_CERT_FILE`, `APP_TLS_KEY_FILE`). The pair is read again whenever
//! either file changes (looked at every `APP_TLS_RELOAD_INTERVAL`), so that a renewed certificate (cert-manager
//! rewrites the Secret's files in place) is served without a restart; a pair that does not load keeps the one
//! before. Handshakes run in tasks of their own, each bounded in time and at most `APP_TLS_MAX_HANDSHAKES` at
//! once, so that clients that never finish one hold nothing but themselves and a bounded number of tasks.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client may take for its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the certificate and key are, how often to look whether they changed, and how many handshakes may be in
/// progress at once.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub reload_interval: Duration,
    pub max_handshakes: usize,
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct LoadError {
    path: String,
    message: String,
}

/// The API's TCP listener with TLS in front: yields connections whose handshake completed.
pub struct TlsListener {
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Loads the pair (an error names the file) and starts accepting on `tcp`.
    pub fn new(tcp: TcpListener, files: TlsFiles) -> Result<Self, LoadError> {
        let local =
            tcp.local_addr().map_err(|error| LoadError { path: "listener".into(), message: error.to_string() })?;
        let resolver = Arc::new(Reloading { current: RwLock::new(Arc::new(load(&files)?)) });
        tokio::spawn(reload(Arc::downgrade(&resolver), files.clone()));
        let mut config = rustls::ServerConfig::builder().with_no_client_auth().with_cert_resolver(resolver);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let (sender, handshaken) = mpsc::channel(64);
        let handshakes = Arc::new(Semaphore::new(files.max_handshakes));
        tokio::spawn(accept(tcp, acceptor, handshakes, sender));
        Ok(TlsListener { handshaken, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(connection) => connection,
            // The accepting task only ends with this listener.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Accepts TCP connections and completes each handshake in a task of its own, holding one of `handshakes` (a
/// connection is accepted only once one is free), until the listener is dropped.
async fn accept(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: Arc<Semaphore>,
    handshaken: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let Ok(permit) = handshakes.clone().acquire_owned().await else { return };
        let (stream, peer) = match tcp.accept().await {
            Ok(connection) => connection,
            Err(error) => {
                // Out of file descriptors and the like: wait a little instead of spinning.
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if handshaken.is_closed() {
            return;
        }
        let (acceptor, handshaken) = (acceptor.clone(), handshaken.clone());
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
            drop(permit);
            match handshake {
                Ok(Ok(stream)) => {
                    let _ = handshaken.send((stream, peer)).await;
                }
                Ok(Err(error)) => tracing::debug!(%error, %peer, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

/// The pair in use, swapped when the files change.
#[derive(Debug)]
struct Reloading {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone())
    }
}

/// Looks at the files' modification times every interval and loads the pair again when one changed, for as long
/// as the listener lives.
async fn reload(resolver: Weak<Reloading>, files: TlsFiles) {
    let mut seen = modified(&files);
    loop {
        tokio::time::sleep(files.reload_interval).await;
        let Some(resolver) = resolver.upgrade() else { return };
        let now = modified(&files);
        if now == seen {
            continue;
        }
        match load(&files) {
            Ok(pair) => {
                *resolver.current.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(pair);
                seen = now;
                tracing::info!(cert = %files.cert.display(), "loaded the renewed TLS certificate");
            }
            // A half-written pair is tried again next time.
            Err(error) => tracing::warn!(%error, "the changed TLS certificate does not load; serving the one before"),
        }
    }
}

fn modified(files: &TlsFiles) -> [Option<SystemTime>; 2] {
    [&files.cert, &files.key].map(|path| std::fs::metadata(path).and_then(|metadata| metadata.modified()).ok())
}

fn load(files: &TlsFiles) -> Result<CertifiedKey, LoadError> {
    let failed = |path: &PathBuf, message: String| LoadError { path: path.display().to_string(), message };
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|error| failed(&files.cert, error.to_string()))?;
    if chain.is_empty() {
        return Err(failed(&files.cert, "no certificate in the file".to_owned()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|error| failed(&files.key, error.to_string()))?;
    let key =
        rustls::crypto::ring::sign::any_supported_type(&key).map_err(|error| failed(&files.key, error.to_string()))?;
    let pair = CertifiedKey::new(chain, key);
    pair.keys_match().map_err(|error| failed(&files.key, format!("does not match the certificate: {error}")))?;
    Ok(pair)
}
