//! The Skills extension's methods: `skills/list`, `skills/get` and
//! `resources/directory/read`; unknown methods when the server has no skills folder
//! (which is answered before the parameters are read).

use porthole_core::params::{DirectoryReadParams, PageParams, UriParams};
use serde_json::{Map, Value};

use super::Method;
use crate::ServerInner;
use crate::jsonrpc::RpcError;
use crate::params::{page, read};

pub(super) fn serve(
    inner: &ServerInner,
    method: Method,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let Some(skills) = &inner.skills else {
        return Err(RpcError::method_not_found(method.name()));
    };
    match method {
        Method::SkillsList => {
            let PageParams { cursor } = read(method.name(), params)?;
            page("skills", &skills.entries(), cursor.as_deref())
        }
        Method::SkillsGet => skills.get(&read::<UriParams>(method.name(), params)?.uri),
        _ => {
            let DirectoryReadParams { uri, cursor } = read(method.name(), params)?;
            page(
                "resources",
                &skills.read_directory(&uri)?,
                cursor.as_deref(),
            )
        }
    }
}
