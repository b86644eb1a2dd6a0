/// The one definition of a tool: name, one-line description and parameters. The OpenAI backend renders it to
/// JSON Schema (`jsonSchema`), the Foundation Models backend to a runtime `GenerationSchema`; both call `run`.

public enum ParameterType: String, Sendable, Equatable {
    case string, integer, boolean
}

public struct ParameterSpec: Sendable, Equatable {
    public let name: String
    public let type: ParameterType
    public let description: String
    public let required: Bool

    public init(_ name: String, _ type: ParameterType, _ description: String, required: Bool = true) {
        self.name = name
        self.type = type
        self.description = description
        self.required = required
    }
}

public struct ToolSpec: Sendable, Equatable {
    public let name: String
    public let description: String
    public let parameters: [ParameterSpec]
    /// A JSON Schema of the tool's own (an MCP server's) that `parameters` cannot express: sent as it is where
    /// JSON Schema is the wire format (openai), and the arguments are passed through unchecked; backends with
    /// schemas of their own (fm) use `parameters`, which then hold a stand-in (one JSON-string argument).
    public let schema: JSONValue?

    public init(name: String, description: String, parameters: [ParameterSpec], schema: JSONValue? = nil) {
        self.name = name
        self.description = description
        self.parameters = parameters
        self.schema = schema
    }

    /// JSON Schema of the arguments object (OpenAI `function.parameters`).
    public var jsonSchema: JSONValue {
        if let schema { return schema }
        var properties = JSONObject()
        for p in parameters {
            var property: JSONObject = ["type": .string(p.type.rawValue)]
            // An empty description is left out: most names say it all, and every token counts on a 4K window.
            if !p.description.isEmpty { property["description"] = .string(p.description) }
            properties[p.name] = .object(property)
        }
        var schema: JSONObject = ["type": "object", "properties": .object(properties)]
        let required = parameters.filter(\.required).map { JSONValue.string($0.name) }
        if !required.isEmpty { schema["required"] = .array(required) }
        return .object(schema)
    }

    /// The OpenAI `tools` array entry.
    public var openAIDefinition: JSONValue {
        .object([
            "type": "function",
            "function": .object([
                "name": .string(name),
                "description": .string(description),
                "parameters": jsonSchema,
            ]),
        ])
    }

    /// Checks raw arguments (a JSON object) against the spec. Integers given as whole-number doubles or numeric
    /// strings and booleans given as "true"/"false" are accepted, because small models produce them.
    public func validate(_ raw: JSONValue) -> Result<ToolArguments, ToolArgumentError> {
        guard let object = raw.objectValue else {
            return .failure(ToolArgumentError(tool: name, message: "arguments must be a JSON object"))
        }
        if schema != nil {  // the tool's own schema: its server checks the arguments
            return .success(ToolArguments(Dictionary(object.entries.map { ($0.key, $0.value) }) { first, _ in first }))
        }
        var values: [String: JSONValue] = [:]
        for p in parameters {
            guard let value = object[p.name], value != .null else {
                if p.required {
                    return .failure(ToolArgumentError(tool: name, message: "missing required argument '\(p.name)'"))
                }
                continue
            }
            switch (p.type, value) {
            case (.string, .string): values[p.name] = value
            case (.string, .number), (.string, .bool): values[p.name] = .string(value.scalarText)
            case (.integer, _) where value.intValue != nil: values[p.name] = value
            case (.integer, .string(let s)) where Int(s.trimmingSpaces) != nil:
                values[p.name] = .int(Int(s.trimmingSpaces) ?? 0)
            case (.boolean, .bool): values[p.name] = value
            case (.boolean, .string(let s)) where ["true", "false"].contains(s.lowercased()):
                values[p.name] = .bool(s.lowercased() == "true")
            default:
                return .failure(ToolArgumentError(
                    tool: name, message: "argument '\(p.name)' must be \(p.type.article) \(p.type.rawValue)"))
            }
        }
        return .success(ToolArguments(values))
    }
}

extension ParameterType {
    fileprivate var article: String { self == .integer ? "an" : "a" }
}

extension JSONValue {
    fileprivate var scalarText: String {
        switch self {
        case .string(let s): s
        case .bool(let b): b ? "true" : "false"
        case .number: jsonText
        default: jsonText
        }
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}

public struct ToolArgumentError: Error, Sendable, Equatable {
    public let tool: String
    public let message: String
    /// The text returned to the model.
    public var modelText: String { "Error: \(tool): \(message)" }
}

/// Validated arguments: every required parameter present with its declared type.
public struct ToolArguments: Sendable, Equatable {
    public let values: [String: JSONValue]
    public init(_ values: [String: JSONValue]) { self.values = values }
    public func string(_ name: String) -> String? { values[name]?.stringValue }
    public func int(_ name: String) -> Int? { values[name]?.intValue }
    public func bool(_ name: String) -> Bool? { values[name]?.boolValue }
}

/// What a tool hands back: the text for the model plus facts for events and the final result.
public struct ToolResult: Sendable, Equatable {
    /// Text for the model. Failures start with `Error:`.
    public var text: String
    public var ok: Bool
    /// One line for the `tool_result` event, e.g. "README.md lines 1-42 of 42".
    public var summary: String
    public var truncated: Bool
    /// Workspace-relative paths this call created or modified.
    public var filesChanged: [String]
    public var commandsRun: Int
    /// runCommand: the command's exit code, when it exited.
    public var exitCode: Int?
    /// writeFile/editFile: the unified diff of the text they changed (bounded), when there is one.
    public var diff: String?

    public init(text: String, ok: Bool = true, summary: String, truncated: Bool = false,
                filesChanged: [String] = [], commandsRun: Int = 0, exitCode: Int? = nil, diff: String? = nil) {
        self.text = text
        self.ok = ok
        self.summary = summary
        self.truncated = truncated
        self.filesChanged = filesChanged
        self.commandsRun = commandsRun
        self.exitCode = exitCode
        self.diff = diff
    }

    /// The `tool_result` event's optional fields for this result (the text as the model got it, bounded).
    public var eventDetail: ToolResultDetail {
        ToolResultDetail(output: ToolResultDetail.bounded(text), exitCode: exitCode, diff: diff)
    }

    public static func failure(_ message: String) -> ToolResult {
        let text = message.hasPrefix("Error:") ? message : "Error: \(message)"
        return ToolResult(text: text, ok: false, summary: String(text.prefix(200)))
    }
}

/// What a tool may use while it runs.
public struct ToolContext: Sendable {
    /// The workspace as given (`--cwd`, absolute). Tools resolve its real path themselves.
    public var workspace: String
    /// The most tokens this result may take (what the request budget has left for it).
    public var maxResultTokens: Int
    /// When the whole run must end; long work (commands) stops by then.
    public var deadline: ContinuousClock.Instant?
    /// Diagnostics for `--verbose` (stderr), never shown to the model.
    public var log: @Sendable (String) -> Void

    public init(workspace: String, maxResultTokens: Int, deadline: ContinuousClock.Instant? = nil,
                log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.workspace = workspace
        self.maxResultTokens = maxResultTokens
        self.deadline = deadline
        self.log = log
    }
}

public protocol AgentTool: Sendable {
    var spec: ToolSpec { get }
    /// Never throws: a failure is a `ToolResult` whose text starts with `Error:`, so the run goes on.
    func run(_ arguments: ToolArguments, context: ToolContext) async -> ToolResult
}

extension AgentTool {
    public var name: String { spec.name }

    /// Validates raw JSON arguments, then runs. Invalid arguments come back as an `Error:` result.
    public func call(raw: JSONValue, context: ToolContext) async -> ToolResult {
        switch spec.validate(raw) {
        case .success(let arguments): return await run(arguments, context: context)
        case .failure(let error): return .failure(error.modelText)
        }
    }
}
