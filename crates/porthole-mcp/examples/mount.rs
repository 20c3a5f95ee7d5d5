//! Mounting the MCP endpoint in a service of your own: an axum app with its own state
//! and routes (a tiny order book) serves `/mcp` beside them, on the same port and in
//! the same process, with one tool that reads the app's state directly.
//!
//! ```text
//! MCP_SECRET=$(openssl rand -hex 32) cargo run -p porthole-mcp --example mount
//! curl -s -X POST http://127.0.0.1:3000/orders -H 'Content-Type: application/json' -d '{"item":"tea"}'
//! claude mcp add --transport http shop http://127.0.0.1:3000/mcp --header "Authorization: Bearer $MCP_SECRET"
//! ```
//!
//! `PORT` picks the port (`0`: any free one); the example prints `listening on
//! http://127.0.0.1:PORT` once it serves. Its tool's arguments and answer are types of
//! the app's, and both schemas are derived from them (`TypedTool`); beside it the crate's
//! ready `server_log` reads the app's own `tracing` log from a ring buffer. The
//! endpoint brings its own guard: loopback
//! peers only, loopback `Host` and `Origin`, and the bearer token.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use porthole_mcp::logs::{LogBuffer, ReadLogs};
use porthole_mcp::{
    Annotations, Auth, McpServer, RequestContext, ToolError, ToolSpec, TypedTool, default_of, typed,
};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt;

/// The app's own state: what its routes change and its MCP tool reads.
#[derive(Clone, Default)]
struct Shop {
    orders: Arc<Mutex<Vec<String>>>,
}

/// `POST /orders {"item": "..."}`: one of the app's own routes.
async fn add_order(State(shop): State<Shop>, Json(order): Json<Value>) -> Json<Value> {
    let item = order["item"].as_str().unwrap_or("nothing").to_string();
    let mut orders = shop.orders.lock().unwrap_or_else(|p| p.into_inner());
    tracing::info!(target: "shop", %item, "order added");
    orders.push(item);
    Json(json!({"orders": orders.len()}))
}

/// The MCP tool: the orders the shop holds, read from its state in-process.
struct ListOrders(Shop);

/// `list_orders`' arguments. The input schema is derived from this type: doc comments
/// become descriptions, `range` the bounds, the serde default the listed `default`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct OrderQuery {
    /// Only orders of items containing this text
    containing: Option<String>,
    /// Most orders to return (the oldest first)
    #[serde(default = "default_of::<10>")]
    #[schemars(range(min = 1, max = 100))]
    limit: usize,
}

/// `list_orders`' answer. Its output schema is derived from this type, doc comments
/// and all, so it says what the answer holds.
#[derive(serde::Serialize, schemars::JsonSchema)]
struct Orders {
    /// The items ordered, oldest first.
    orders: Vec<String>,
}

#[async_trait]
impl TypedTool for ListOrders {
    type Args = OrderQuery;
    type Answer = Orders;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "list_orders",
            "List orders",
            "The orders the shop holds, oldest first",
        )
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, query: OrderQuery, _: &RequestContext) -> Result<Orders, ToolError> {
        let orders = self.0.orders.lock().unwrap_or_else(|p| p.into_inner());
        let wanted = |item: &&String| query.containing.as_ref().is_none_or(|c| item.contains(c));
        let orders = orders.iter().filter(wanted).take(query.limit).cloned();
        Ok(Orders {
            orders: orders.collect(),
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secret = std::env::var("MCP_SECRET")
        .map_err(|_| "set MCP_SECRET to a token of at least 16 characters")?;
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3000);
    let shop = Shop::default();

    // The app's own `tracing` log, also copied into a ring buffer the `server_log` tool
    // reads: a client asks what the service logged, in-process.
    let logs = LogBuffer::new(1000);
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer())
            .with(logs.layer()),
    )?;

    let mcp = McpServer::builder("shop", "1.0.0")
        .auth(Auth::bearer(&secret))
        .signing_secret(Some(secret))
        .tools(vec![
            typed(ListOrders(shop.clone())),
            typed(ReadLogs::new(logs)),
        ])
        .build()?;
    let app = Router::new()
        .route("/orders", post(add_order))
        .with_state(shop)
        .merge(mcp.router());

    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://{}", listener.local_addr()?);
    // The guard answers loopback peers only: it reads the peer from `ConnectInfo`.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
