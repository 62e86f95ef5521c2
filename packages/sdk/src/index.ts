// @tether/sdk: Tether inside official-SDK MCP servers (issue 13). Being built.
export {};
