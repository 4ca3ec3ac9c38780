//! One tool over stdio on rmcp: the floor of a server built on the SDK.
use rmcp::{
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{ServerCapabilities, ServerConfig},
    schemars, tool, tool_handler, tool_router, ServerHandler, ServiceExt,
};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Target {
    /// pid of the program
    target: Option<u32>,
}

#[derive(Debug, Clone)]
struct Probe {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Probe {
    #[tool(description = "Lists the programs that can be profiled")]
    fn list_targets(&self, Parameters(Target { target }): Parameters<Target>) -> String {
        format!("{:?}", target)
    }
}

#[tool_handler]
impl ServerHandler for Probe {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let service = Probe { tool_router: Probe::tool_router() }.serve(rmcp::transport::stdio()).await.expect("serve");
    service.waiting().await.expect("wait");
}
