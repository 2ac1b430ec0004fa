//! Serving one fake (ECR, STS, the token registry) on an ephemeral loopback port, from a
//! thread with a tokio runtime of its own, so that a synchronous test can start and drop it.

use std::thread::JoinHandle;

use tokio::sync::oneshot;

/// A loopback port bound for a fake, before its app is built (some apps name their own URL).
pub(crate) struct Bound {
    listener: std::net::TcpListener,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
}

/// Binds an ephemeral port on 127.0.0.1.
pub(crate) fn bind() -> Bound {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").expect("binding an ephemeral port on 127.0.0.1");
    listener
        .set_nonblocking(true)
        .expect("a fresh socket can be made non-blocking");
    let addr = listener
        .local_addr()
        .expect("a bound socket has an address");
    Bound {
        listener,
        url: format!("http://{addr}"),
    }
}

/// A fake being served. Dropping it stops the server and joins its thread; the runtime's end
/// aborts connections still open (pooled keep-alives).
pub(crate) struct Served {
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Served {
    /// Serves `app` on `bound` until dropped; `name` names the thread and the error line.
    pub(crate) fn start(name: &str, bound: Bound, app: axum::Router) -> Served {
        let (shutdown, stopped) = oneshot::channel::<()>();
        let port = bound.url.rsplit(':').next().unwrap_or_default().to_owned();
        let what = name.to_owned();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-{port}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .unwrap_or_else(|e| panic!("building the {what}'s tokio runtime: {e}"));
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(bound.listener)
                        .expect("registering the listener with tokio");
                    tokio::select! {
                        served = axum::serve(listener, app) => {
                            if let Err(e) = served {
                                eprintln!("{what} stopped serving: {e}");
                            }
                        }
                        _ = stopped => {}
                    }
                });
            })
            .unwrap_or_else(|e| panic!("spawning the {name}'s thread: {e}"));
        Served {
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
