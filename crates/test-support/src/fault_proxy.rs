//! A fault-injecting TCP proxy on loopback: forwards every connection to an upstream server until it is cut;
//! then it closes every open connection and refuses new ones (accepted and closed at once, as a host that is down
//! behind a load balancer looks) until it is restored.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct FaultProxy {
    address: SocketAddr,
    cut: Arc<AtomicBool>,
    /// Bumped on every cut; each connection watches it and closes when it changes.
    generation: watch::Sender<u64>,
    accept: JoinHandle<()>,
}

/// The host and port a URL names (its scheme's port when it names none).
pub fn socket_address(url: &str) -> SocketAddr {
    let url = reqwest::Url::parse(url).expect("a URL");
    let host = url.host_str().expect("a URL with a host");
    format!("{host}:{}", url.port_or_known_default().expect("a URL with a port")).parse().expect("an IP address")
}

impl FaultProxy {
    /// A proxy in front of the server `url` names, and `url` through the proxy.
    pub async fn in_front_of(url: &str) -> (FaultProxy, String) {
        let proxy = FaultProxy::start(socket_address(url)).await;
        let mut proxied = reqwest::Url::parse(url).expect("a URL");
        proxied.set_port(Some(proxy.address().port())).expect("a URL that can have a port");
        (proxy, proxied.to_string())
    }

    pub async fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let address = listener.local_addr().expect("proxy address");
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0u64);
        let accept = {
            let cut = cut.clone();
            let generation = generation.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((mut client, _)) = listener.accept().await else { continue };
                    if cut.load(Ordering::SeqCst) {
                        drop(client);
                        continue;
                    }
                    let mut closed = generation.subscribe();
                    tokio::spawn(async move {
                        let Ok(mut server) = TcpStream::connect(upstream).await else { return };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = closed.changed() => {}
                        }
                    });
                }
            })
        };
        FaultProxy { address, cut, generation, accept }
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Closes every connection through the proxy and refuses new ones until [`FaultProxy::restore`].
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.generation.send_modify(|generation| *generation += 1);
    }

    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.generation.send_modify(|generation| *generation += 1);
    }
}
