import AppleCodeCore
import Foundation

/// One tool of an MCP server, offered to the model as `mcp__<server>__<tool>`. A flat input schema (an object of
/// string, integer and boolean properties) becomes the tool's own parameters, which every backend can express. Any
/// other schema is kept as the spec's `schema` (the openai backend sends it as it is) and stood in for by one
/// string argument, `arguments`, holding the JSON object (the "universal JSON proxy"), with the schema in its
/// description: what fm's runtime schema offers. Results are cut to the room the window has left.
public struct MCPTool: AgentTool {
    public let spec: ToolSpec
    public let remoteName: String
    public let proxied: Bool
    let connection: MCPConnection
    let timeout: Double

    public static let prefix = "mcp__"
    static let proxyArgument = "arguments"

    /// The tool for one entry of `tools/list`; nil (with why) when its name cannot be offered.
    static func make(_ entry: JSONValue, server: MCPServerConfig, connection: MCPConnection) -> (MCPTool?, String?) {
        guard let remote = entry["name"]?.stringValue, !remote.isEmpty else { return (nil, "a tool without a name") }
        let name = "\(prefix)\(server.name)__\(remote)"
        guard name.utf8.count <= 64, remote.range(of: "^[A-Za-z0-9_-]+$", options: .regularExpression) != nil else {
            return (nil, "tool '\(remote)' of '\(server.name)': its name does not fit a tool name (64 bytes of letters, "
                + "digits, '-', '_')")
        }
        let description = entry["description"]?.stringValue ?? ""
        let schema = entry["inputSchema"] ?? .object(JSONObject())
        if let parameters = flatParameters(schema) {
            let spec = ToolSpec(name: name, description: description, parameters: parameters)
            return (MCPTool(spec: spec, remoteName: remote, proxied: false, connection: connection,
                            timeout: server.timeoutSeconds), nil)
        }
        let argument = ParameterSpec(proxyArgument, .string, "the arguments as one JSON object, with this JSON schema: "
            + schema.jsonText)
        let spec = ToolSpec(name: name, description: description, parameters: [argument], schema: schema)
        return (MCPTool(spec: spec, remoteName: remote, proxied: true, connection: connection,
                        timeout: server.timeoutSeconds), nil)
    }

    /// The parameters of a schema every backend can express as it is, or nil.
    static func flatParameters(_ schema: JSONValue) -> [ParameterSpec]? {
        guard schema["type"]?.stringValue ?? "object" == "object" else { return nil }
        let required = Set(schema["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        var parameters: [ParameterSpec] = []
        for (name, property) in schema["properties"]?.objectValue?.entries ?? [] {
            guard let typeName = property["type"]?.stringValue, let type = ParameterType(rawValue: typeName),
                  property["enum"] == nil, property["properties"] == nil else { return nil }
            parameters.append(ParameterSpec(name, type, property["description"]?.stringValue ?? "",
                                            required: required.contains(name)))
        }
        return parameters
    }

    public func run(_ arguments: ToolArguments, context: ToolContext) async -> ToolResult {
        var object = JSONObject()
        if proxied, arguments.values.count == 1, let text = arguments.string(MCPTool.proxyArgument),
           spec.schema?["properties"]?[MCPTool.proxyArgument] == nil {
            // The stand-in (fm): one JSON-string argument holding the object.
            guard let parsed = try? JSONValue.parse(text), let given = parsed.objectValue else {
                return .failure("Error: \(spec.name): '\(MCPTool.proxyArgument)' must be a JSON object")
            }
            object = given
        } else if proxied {
            // The server's own schema (openai): the arguments as the model gave them.
            for (key, value) in arguments.values.sorted(by: { $0.key < $1.key }) { object[key] = value }
        } else {
            for parameter in spec.parameters {
                if let value = arguments.values[parameter.name] { object[parameter.name] = value }
            }
        }
        var limit = timeout
        if let deadline = context.deadline {
            limit = min(limit, max(0.1, (deadline - ContinuousClock.now).seconds))
        }
        let result: JSONValue
        do {
            result = try await connection.request(
                "tools/call", params: ["name": .string(remoteName), "arguments": .object(object)], timeout: limit)
        } catch {
            return .failure("Error: \(spec.name): \(error)")
        }
        let text = MCPTool.text(of: result)
        if result["isError"]?.boolValue == true {
            return ToolResult.failure("Error: \(spec.name): \(text)").fitted(toTokens: context.maxResultTokens)
        }
        return ToolResult(text: text.isEmpty ? "(no output)" : text, summary: "\(spec.name): \(text.utf8.count) bytes")
            .fitted(toTokens: context.maxResultTokens)
    }

    /// A `tools/call` result as text: its text blocks, a note for each other block; else its structured content.
    static func text(of result: JSONValue) -> String {
        var parts: [String] = []
        for block in result["content"]?.arrayValue ?? [] {
            if let text = block["text"]?.stringValue {
                parts.append(text)
            } else {
                parts.append("[\(block["type"]?.stringValue ?? "unknown") content not shown]")
            }
        }
        if parts.isEmpty, let structured = result["structuredContent"] { parts.append(structured.jsonText) }
        return parts.joined(separator: "\n")
    }
}

/// The MCP tools of one run: the servers started, their tools (those a `--read-only` run may use only), the
/// catalog fitted to a third of the window.
public struct MCPToolSet: Sendable {
    public let tools: [any AgentTool]
    public let notices: [String]
    let connections: [MCPConnection]

    public static let empty = MCPToolSet(tools: [], notices: [], connections: [])
    static let startTimeout: Double = 20

    public func shutdown() {
        for connection in connections { connection.stop() }
    }

    /// Starts every server of `config` and lists its tools. A server that cannot start or list is left out with a
    /// notice. A catalog over a third of `contextTokens` is cut to `allowedTools`; still over (or nothing to cut
    /// to), the run cannot be budgeted: `AgentError(.context)` says so.
    public static func start(_ config: MCPConfig, readOnly: Bool, contextTokens: Int, searchPath: String,
                             log: @escaping @Sendable (String) -> Void) async throws -> MCPToolSet {
        var tools: [MCPTool] = []
        var notices: [String] = []
        var connections: [MCPConnection] = []
        for server in config.servers {
            do {
                let connection = try MCPConnection(server, searchPath: searchPath)
                connections.append(connection)
                // Starting (an interpreter importing its SDK) may take longer than the calls the config times.
                let timeout = max(server.timeoutSeconds, startTimeout)
                try await connection.initialize(timeout: timeout)
                var cursor: JSONValue = .null
                for _ in 0..<20 {  // pages of tools/list
                    let params: JSONValue = cursor == .null ? .object(JSONObject()) : ["cursor": cursor]
                    let listed = try await connection.request("tools/list", params: params, timeout: timeout)
                    for entry in listed["tools"]?.arrayValue ?? [] {
                        if readOnly, entry["annotations"]?["readOnlyHint"]?.boolValue != true { continue }
                        let (tool, problem) = MCPTool.make(entry, server: server, connection: connection)
                        if let tool { tools.append(tool) }
                        if let problem { notices.append("MCP: \(problem); not offered") }
                    }
                    cursor = listed["nextCursor"] ?? .null
                    if cursor == .null { break }
                }
                log("MCP server '\(server.name)': \(tools.filter { $0.connection === connection }.count) tool(s)")
            } catch {
                notices.append("MCP server '\(server.name)' could not start: \(error); its tools are not offered")
            }
        }
        let set = MCPToolSet(tools: try fitted(tools, allowed: config.allowedTools, contextTokens: contextTokens),
                             notices: notices, connections: connections)
        return set
    }

    static func catalogTokens(_ tools: [MCPTool]) -> Int {
        tools.reduce(0) { $0 + TokenEstimator.estimate($1.spec.openAIDefinition.jsonText) }
    }

    static func fitted(_ tools: [MCPTool], allowed: [String]?, contextTokens: Int) throws -> [MCPTool] {
        let room = contextTokens / 3
        let tokens = catalogTokens(tools)
        guard tokens > room else { return tools }
        guard let allowed else {
            throw AgentError(.context, "the MCP tools' definitions take about \(tokens) tokens, more than a third of the "
                + "\(contextTokens)-token window (\(room)): name the ones to offer in the config's \"allowedTools\"")
        }
        let kept = tools.filter { allowed.contains($0.spec.name) }
        let keptTokens = catalogTokens(kept)
        guard keptTokens <= room else {
            throw AgentError(.context, "the MCP tools in \"allowedTools\" take about \(keptTokens) tokens, more than a "
                + "third of the \(contextTokens)-token window (\(room)): allow fewer")
        }
        return kept
    }
}
