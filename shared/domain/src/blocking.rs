//! The dedicated, bounded pool for parsing and byte I/O.

use std::sync::Arc;
use tokio::sync::Semaphore;

/// Runs blocking work on tokio's blocking threads, at most `FILE_IO_MAX_WORKERS` at once,
/// so a burst of uploads queues here instead of occupying every blocking thread.
#[derive(Debug, Clone)]
pub struct BlockingPool {
    permits: Arc<Semaphore>,
}

#[derive(Debug, thiserror::Error)]
#[error("blocking work panicked or was cancelled")]
pub struct BlockingError;

impl BlockingPool {
    pub fn new(workers: usize) -> Self {
        Self { permits: Arc::new(Semaphore::new(workers.max(1))) }
    }

    /// Runs `work` once a permit is free. The permit moves into the blocking task, so a
    /// cancelled caller never frees a slot while the work is still running.
    pub async fn run<T, F>(&self, work: F) -> Result<T, BlockingError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let permit = self.permits.clone().acquire_owned().await.map_err(|_| BlockingError)?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await
        .map_err(|_| BlockingError)
    }

    /// Permits free right now (for tests and metrics).
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn never_runs_more_than_its_workers() {
        let pool = BlockingPool::new(2);
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (pool, running, peak) = (pool.clone(), running.clone(), peak.clone());
            tasks.push(tokio::spawn(async move {
                pool.run(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    running.fetch_sub(1, Ordering::SeqCst);
                })
                .await
            }));
        }
        for task in tasks {
            task.await.expect("join").expect("run");
        }
        assert_eq!(peak.load(Ordering::SeqCst), 2);
        assert_eq!(pool.available(), 2);
    }
}
