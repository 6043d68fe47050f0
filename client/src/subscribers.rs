//! A list of handlers that can be called while handlers come and go.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use super::transport::Subscription;

type Handler<T> = Arc<dyn Fn(&T) + Send + Sync>;

struct List<T: ?Sized> {
    next_id: u64,
    handlers: Vec<(u64, Handler<T>)>,
}

/// Handlers of one kind of notification.
///
/// Invariant: no lock is held while a handler runs, so a handler may subscribe, dispose or emit
/// again without deadlocking. A handler disposed during an `emit` may still see that one value.
pub(crate) struct Subscribers<T: ?Sized> {
    list: Arc<Mutex<List<T>>>,
}

impl<T: ?Sized + 'static> Subscribers<T> {
    pub(crate) fn new() -> Self {
        Subscribers {
            list: Arc::new(Mutex::new(List {
                next_id: 0,
                handlers: Vec::new(),
            })),
        }
    }

    pub(crate) fn subscribe(&self, handler: Handler<T>) -> Subscription {
        let id = {
            let mut list = lock(&self.list);
            let id = list.next_id;
            list.next_id += 1;
            list.handlers.push((id, handler));
            id
        };
        // Weak: a subscription outliving its transport must not keep the list alive.
        let weak: Weak<Mutex<List<T>>> = Arc::downgrade(&self.list);
        Subscription::new(move || {
            if let Some(list) = weak.upgrade() {
                lock(&list).handlers.retain(|(other, _)| *other != id);
            }
        })
    }

    pub(crate) fn emit(&self, value: &T) {
        let snapshot: Vec<Handler<T>> = lock(&self.list)
            .handlers
            .iter()
            .map(|(_, handler)| Arc::clone(handler))
            .collect();
        for handler in snapshot {
            handler(value);
        }
    }
}

/// Locks a mutex, ignoring poisoning: every critical section here leaves its data consistent, so
/// a panic elsewhere must not turn into a second panic.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
