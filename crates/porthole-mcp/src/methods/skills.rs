//! The Skills extension's methods: `skills/list`, `skills/get` and
//! `resources/directory/read`; unknown methods when the server has no skills folder.

use serde_json::{Map, Value};

use super::Method;
use crate::ServerInner;
use crate::jsonrpc::RpcError;
use crate::params::{page, required_str};

pub(super) fn serve(
    inner: &ServerInner,
    method: Method,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let Some(skills) = &inner.skills else {
        return Err(RpcError::method_not_found(match method {
            Method::SkillsList => "skills/list",
            Method::SkillsGet => "skills/get",
            _ => "resources/directory/read",
        }));
    };
    match method {
        Method::SkillsList => page("skills", &skills.entries(), params),
        Method::SkillsGet => skills.get(required_str(params, "uri")?),
        _ => page(
            "resources",
            &skills.read_directory(required_str(params, "uri")?)?,
            params,
        ),
    }
}
