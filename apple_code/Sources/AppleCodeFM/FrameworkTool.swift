#if canImport(FoundationModels)
import FoundationModels
#else
import FoundationModelsMirror
#endif
import AppleCodeCore

/// One `AgentTool` offered to the on-device model through a runtime schema (no `@Generable`, which needs the
/// Xcode-only macro plugin). The framework runs the tool loop inside one response and shows no tool activity in
/// its snapshots, so the `tool_call`/`tool_result` events are emitted here.
struct FrameworkTool: Tool {
    typealias Arguments = GeneratedContent
    typealias Output = String

    let name: String
    let description: String
    let parameters: GenerationSchema
    let tool: any AgentTool
    let ledger: RunLedger
    let events: any EventSink
    let workspace: String
    let deadline: ContinuousClock.Instant?
    let log: @Sendable (String) -> Void
    /// Counts results when the run's plan is the model's own counts; nil: the estimator budgets.
    let counter: ModelTokens?

    init(_ tool: any AgentTool, ledger: RunLedger, events: any EventSink, request: AgentRequest,
         counter: ModelTokens? = nil) throws {
        name = tool.spec.name
        description = tool.spec.description
        parameters = try Self.schema(for: tool.spec)
        self.tool = tool
        self.ledger = ledger
        self.events = events
        workspace = request.workspace
        deadline = request.deadline
        log = request.log
        self.counter = counter
    }

    /// The same parameter spec the OpenAI backend renders to JSON Schema, as a `GenerationSchema`.
    static func schema(for spec: ToolSpec) throws -> GenerationSchema {
        // `Property` is not Sendable before the 27 SDK: build it here and keep only the finished schema.
        let properties = spec.parameters.map { parameter in
            DynamicGenerationSchema.Property(name: parameter.name, description: parameter.description,
                                             schema: leafSchema(parameter.type), isOptional: !parameter.required)
        }
        let root = DynamicGenerationSchema(name: spec.name + "Arguments", properties: properties)
        return try GenerationSchema(root: root, dependencies: [])
    }

    private static func leafSchema(_ type: ParameterType) -> DynamicGenerationSchema {
        switch type {
        case .string: DynamicGenerationSchema(type: String.self)
        case .integer: DynamicGenerationSchema(type: Int.self)
        case .boolean: DynamicGenerationSchema(type: Bool.self)
        }
    }

    // Plain (not `@concurrent`) on purpose: without NonisolatedNonsendingByDefault a nonisolated async method
    // already runs concurrently, so this one spelling satisfies both the 26.0-26.3 requirement and 26.4's
    // `@concurrent func call`. It never throws an argument or tool failure: a throw would end the whole turn.
    func call(arguments: GeneratedContent) async throws -> String {
        let raw = JSONValue(arguments)
        switch ledger.admitCall() {
        case .abort:
            throw MaxTurnsReached()
        case .refuse(let id, let message):
            events.emit(.toolCall(id: id, name: name, arguments: raw))
            let refused = ToolResult.failure(message)
            ledger.finishCall(tool: name, arguments: raw.jsonText, result: refused)
            events.toolResult(id: id, name: name, refused)
            return refused.text
        case .run(let id, let room):
            events.emit(.toolCall(id: id, name: name, arguments: raw))
            let context = ToolContext(workspace: workspace, maxResultTokens: room, deadline: deadline, log: log)
            let count: ((String) async -> Int?)? = counter.map { counter in { await counter.count($0) } }
            let (result, resultTokens) = await ExactFit.run(tool, raw: raw, context: context, room: room,
                                                            rate: ledger.rate, count: count)
            if let resultTokens { ledger.sample(counted: resultTokens, text: result.text) }
            let callTokens = await counter?.count(name + raw.jsonText)
            ledger.finishCall(tool: name, arguments: raw.jsonText, result: result, callTokens: callTokens,
                              resultTokens: resultTokens)
            events.toolResult(id: id, name: name, result)
            return result.text
        }
    }
}

extension JSONValue {
    /// The arguments the model generated, as the JSON the shared validation (`ToolSpec.validate`) checks.
    init(_ content: GeneratedContent) {
        switch content.kind {
        case .null: self = .null
        case .bool(let value): self = .bool(value)
        case .number(let value): self = .number(value)
        case .string(let value): self = .string(value)
        case .array(let items): self = .array(items.map { JSONValue($0) })
        case .structure(properties: let properties, orderedKeys: let orderedKeys):
            var object = JSONObject()
            for key in orderedKeys { object[key] = properties[key].map { JSONValue($0) } }
            for key in properties.keys.sorted() where object[key] == nil {
                object[key] = properties[key].map { JSONValue($0) }
            }
            self = .object(object)
        @unknown default:
            self = (try? JSONValue.parse(content.jsonString)) ?? .string(content.jsonString)
        }
    }
}
