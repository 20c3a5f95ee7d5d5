//! Who sent a request, as far as task ownership cares: the credentials it carried.

/// The caller's credentials as sent (its `Authorization` header). Task ownership is a
/// keyed hash of them (`TaskEngine::owner` in `tasks`), worked out only by the
/// few requests that touch tasks: for a cheap call the hash would be a fair share of
/// its time.
#[derive(Clone, Default)]
pub(crate) struct Caller {
    pub(crate) authorization: Option<axum::http::HeaderValue>,
}
