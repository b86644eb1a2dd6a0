// Linux-only stand-in for exactly the FoundationModels API subset that AppleCodeFM uses, so `swift build` on
// Linux type-checks the backend's real source and its logic is testable. Everything is inside
// `#if !canImport(FoundationModels)` so it can never shadow the real framework, and Package.swift links it only
// `.when(platforms: [.linux])`. (scripts/fm-interface-gate.sh also type-checks AppleCodeFM against modules built
// from the real interfaces; the mirror is what its runtime tests run on.)
//
// Rules for this file (checked by MirrorDeclarationTests against the interface dumps in apple_code/Interfaces):
// - A `public` declaration line is copied verbatim from the 26.1 dump (26.4 inside `#if FM_SDK_26_4`), except
//   for attributes the SourceKit dump drops (`@_disfavoredOverload`) and conformances left out (a subset).
// - Test-only additions carry a trailing `// mirror-only` and are named Mirror*; AppleCodeFM must not use them.
// - The result-builder attribute on `promptRepresentation`/`instructionsRepresentation` is left out: the mirror
//   has no builders, and the backend never writes a builder body.
#if !canImport(FoundationModels)
import Foundation
import Synchronization

// MARK: - Representable protocols

public protocol ConvertibleFromGeneratedContent : SendableMetatype {
    init(_ content: GeneratedContent) throws
}

public protocol ConvertibleToGeneratedContent : InstructionsRepresentable, PromptRepresentable {
    var generatedContent: GeneratedContent { get }
}

extension ConvertibleToGeneratedContent {
    public var instructionsRepresentation: Instructions { get { Instructions(text: generatedContent.jsonString) } }
    public var promptRepresentation: Prompt { get { Prompt(text: generatedContent.jsonString) } }
}

public protocol Generable : ConvertibleFromGeneratedContent, ConvertibleToGeneratedContent {
    associatedtype PartiallyGenerated : ConvertibleFromGeneratedContent = Self
    static var generationSchema: GenerationSchema { get }
}

public protocol InstructionsRepresentable {
    var instructionsRepresentation: Instructions { get }
}

public protocol PromptRepresentable {
    var promptRepresentation: Prompt { get }
}

public struct Instructions : Sendable {
    let text: String
    init(text: String) { self.text = text }
    public init(_ content: some InstructionsRepresentable) {
        self = content.instructionsRepresentation
    }
}

extension Instructions : InstructionsRepresentable {
    public var instructionsRepresentation: Instructions { get { self } }
}

public struct Prompt : Sendable {
    let text: String
    init(text: String) { self.text = text }
    public init(_ content: some PromptRepresentable) {
        self = content.promptRepresentation
    }
}

extension Prompt : PromptRepresentable {
    public var promptRepresentation: Prompt { get { self } }
}

// MARK: - GeneratedContent

public struct GenerationID : Sendable, Hashable {
    private let uuid = UUID()
    public init() {}
}

public struct GeneratedContent : Sendable, Equatable, Generable, CustomDebugStringConvertible {
    public static var generationSchema: GenerationSchema { get { GenerationSchema(node: .leaf("object")) } }
    public var id: GenerationID?
    private let storedKind: Kind

    public init(_ content: GeneratedContent) throws {
        self = content
    }

    public var generatedContent: GeneratedContent { get { self } }

    public init(properties: KeyValuePairs<String, any ConvertibleToGeneratedContent>, id: GenerationID? = nil) {
        var values: [String: GeneratedContent] = [:]
        var order: [String] = []
        for (key, value) in properties {
            if values.updateValue(value.generatedContent, forKey: key) == nil { order.append(key) }
        }
        self.init(kind: .structure(properties: values, orderedKeys: order), id: id)
    }

    public init(_ value: some ConvertibleToGeneratedContent) {
        self = value.generatedContent
    }

    /// Parses complete JSON (the real framework also accepts a partial document; the mirror does not need to).
    public init(json: String) throws {
        do {
            self = try JSONDecoder().decode(JSONNode.self, from: Data(json.utf8)).content
        } catch {
            throw LanguageModelSession.GenerationError.decodingFailure(.init(debugDescription: "invalid JSON: \(error)"))
        }
    }

    public var jsonString: String { get { Self.json(storedKind) } }

    public var debugDescription: String { get { jsonString } }

    public var isComplete: Bool { get { true } }

    public static func == (a: GeneratedContent, b: GeneratedContent) -> Bool {
        a.storedKind == b.storedKind
    }

    private static func json(_ kind: Kind) -> String {
        switch kind {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .number(let n): return n.rounded() == n && abs(n) < 9e15 ? String(Int64(n)) : String(n)
        case .string(let s): return quoted(s)
        case .array(let items): return "[" + items.map { json($0.kind) }.joined(separator: ",") + "]"
        case .structure(let properties, let orderedKeys):
            let fields = orderedKeys.compactMap { key in properties[key].map { quoted(key) + ":" + json($0.kind) } }
            return "{" + fields.joined(separator: ",") + "}"
        }
    }

    private static func quoted(_ s: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: [s], options: [.withoutEscapingSlashes])) ?? Data()
        let array = String(decoding: data, as: UTF8.self)
        return String(array.dropFirst().dropLast())
    }
}

extension GeneratedContent {
    public enum Kind : Equatable, Sendable {
        case null
        case bool(Bool)
        case number(Double)
        case string(String)
        case array([GeneratedContent])
        case structure(properties: [String : GeneratedContent], orderedKeys: [String])
    }

    public init(kind: GeneratedContent.Kind, id: GenerationID? = nil) {
        self.storedKind = kind
        self.id = id
    }

    public var kind: GeneratedContent.Kind { get { storedKind } }
}

/// Decodes any JSON value into GeneratedContent (object keys sorted: JSONDecoder does not keep their order).
private struct JSONNode: Decodable {
    let content: GeneratedContent

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        if let object = try? decoder.container(keyedBy: Key.self) {
            var values: [String: GeneratedContent] = [:]
            for key in object.allKeys { values[key.stringValue] = try object.decode(JSONNode.self, forKey: key).content }
            content = GeneratedContent(kind: .structure(properties: values, orderedKeys: values.keys.sorted()))
        } else if var array = try? decoder.unkeyedContainer() {
            var items: [GeneratedContent] = []
            while !array.isAtEnd { items.append(try array.decode(JSONNode.self).content) }
            content = GeneratedContent(kind: .array(items))
        } else {
            let value = try decoder.singleValueContainer()
            if value.decodeNil() {
                content = GeneratedContent(kind: .null)
            } else if let bool = try? value.decode(Bool.self) {
                content = GeneratedContent(kind: .bool(bool))
            } else if let number = try? value.decode(Double.self) {
                content = GeneratedContent(kind: .number(number))
            } else {
                content = GeneratedContent(kind: .string(try value.decode(String.self)))
            }
        }
    }
}

// MARK: - Built-in Generable types

extension Bool : Generable {
    public static var generationSchema: GenerationSchema { get { GenerationSchema(node: .leaf("boolean")) } }
    public init(_ content: GeneratedContent) throws {
        guard case .bool(let value) = content.kind else { throw mismatch("Bool", content) }
        self = value
    }
    public var generatedContent: GeneratedContent { get { GeneratedContent(kind: .bool(self)) } }
}

extension String : Generable {
    public static var generationSchema: GenerationSchema { get { GenerationSchema(node: .leaf("string")) } }
    public init(_ content: GeneratedContent) throws {
        guard case .string(let value) = content.kind else { throw mismatch("String", content) }
        self = value
    }
    public var generatedContent: GeneratedContent { get { GeneratedContent(kind: .string(self)) } }
}

extension Int : Generable {
    public static var generationSchema: GenerationSchema { get { GenerationSchema(node: .leaf("integer")) } }
    public init(_ content: GeneratedContent) throws {
        guard case .number(let value) = content.kind, let exact = Int(exactly: value) else {
            throw mismatch("Int", content)
        }
        self = exact
    }
    public var generatedContent: GeneratedContent { get { GeneratedContent(kind: .number(Double(self))) } }
}

extension Double : Generable {
    public static var generationSchema: GenerationSchema { get { GenerationSchema(node: .leaf("number")) } }
    public init(_ content: GeneratedContent) throws {
        guard case .number(let value) = content.kind else { throw mismatch("Double", content) }
        self = value
    }
    public var generatedContent: GeneratedContent { get { GeneratedContent(kind: .number(self)) } }
}

private func mismatch(_ type: String, _ content: GeneratedContent) -> LanguageModelSession.GenerationError {
    .decodingFailure(.init(debugDescription: "cannot decode \(type) from \(content.jsonString)"))
}

extension String : InstructionsRepresentable {
    public var instructionsRepresentation: Instructions { get { Instructions(text: self) } }
}

extension String : PromptRepresentable {
    public var promptRepresentation: Prompt { get { Prompt(text: self) } }
}

// MARK: - Schemas

public struct GenerationGuide<Value> {
}

public struct DynamicGenerationSchema : Sendable {
    let node: SchemaNode

    public init(name: String, description: String? = nil, properties: [DynamicGenerationSchema.Property]) {
        node = .object(name: name, description: description, properties: properties.map {
            SchemaNode.Field(name: $0.name, description: $0.description, node: $0.schema.node,
                             isOptional: $0.isOptional)
        })
    }

    public init<Value>(type: Value.Type, guides: [GenerationGuide<Value>] = []) where Value : Generable {
        node = Value.generationSchema.node
    }

    /// Not Sendable, as in the 26.x interfaces: the backend must not store it in a Sendable value.
    public struct Property {
        let name: String
        let description: String?
        let schema: DynamicGenerationSchema
        let isOptional: Bool

        public init(name: String, description: String? = nil, schema: DynamicGenerationSchema, isOptional: Bool = false) {
            self.name = name
            self.description = description
            self.schema = schema
            self.isOptional = isOptional
        }
    }
}

/// The mirror's schema tree (rendered as JSON Schema by `debugDescription`, like the real one).
indirect enum SchemaNode: Sendable, Equatable {
    struct Field: Sendable, Equatable {
        let name: String
        let description: String?
        let node: SchemaNode
        let isOptional: Bool
    }

    case leaf(String)
    case object(name: String, description: String?, properties: [Field])
}

public struct GenerationSchema : Sendable, CustomDebugStringConvertible {
    let node: SchemaNode

    init(node: SchemaNode) { self.node = node }

    public var debugDescription: String { get { Self.render(node) } }

    public init(root: DynamicGenerationSchema, dependencies: [DynamicGenerationSchema]) throws {
        if case .object(let name, _, let properties) = root.node {
            var seen = Set<String>()
            for field in properties where !seen.insert(field.name).inserted {
                throw SchemaError.duplicateProperty(
                    schema: name, property: field.name, context: .init(debugDescription: "duplicate property"))
            }
        }
        node = root.node
    }

    public enum SchemaError : Error, LocalizedError {
        public struct Context : Sendable {
            public let debugDescription: String
            public init(debugDescription: String) { self.debugDescription = debugDescription }
        }
        case duplicateType(schema: String?, type: String, context: GenerationSchema.SchemaError.Context)
        case duplicateProperty(schema: String, property: String, context: GenerationSchema.SchemaError.Context)
        case emptyTypeChoices(schema: String, context: GenerationSchema.SchemaError.Context)
        case undefinedReferences(schema: String?, references: [String], context: GenerationSchema.SchemaError.Context)
        public var errorDescription: String? { get { "\(self)" } }
        public var recoverySuggestion: String? { get { nil } }
    }

    private static func render(_ node: SchemaNode) -> String {
        switch node {
        case .leaf(let type):
            return "{\"type\":\"\(type)\"}"
        case .object(let name, let description, let fields):
            var parts = ["\"title\":\"\(name)\"", "\"type\":\"object\""]
            if let description { parts.append("\"description\":\(GeneratedContent(kind: .string(description)).jsonString)") }
            let properties = fields.map { field -> String in
                var rendered = render(field.node)
                if let text = field.description {
                    rendered = String(rendered.dropLast())
                        + ",\"description\":\(GeneratedContent(kind: .string(text)).jsonString)}"
                }
                return "\"\(field.name)\":\(rendered)"
            }
            parts.append("\"properties\":{\(properties.joined(separator: ","))}")
            let required = fields.filter { !$0.isOptional }.map { "\"\($0.name)\"" }
            parts.append("\"required\":[\(required.joined(separator: ","))]")
            parts.append("\"x-order\":[\(fields.map { "\"\($0.name)\"" }.joined(separator: ","))]")
            return "{" + parts.joined(separator: ",") + "}"
        }
    }
}

// MARK: - Options

public struct GenerationOptions : Sendable, Equatable {
    public struct SamplingMode : Sendable, Equatable {
        private let name: String
        public static var greedy: GenerationOptions.SamplingMode { get { SamplingMode(name: "greedy") } }
    }
    public var sampling: GenerationOptions.SamplingMode?
    public var temperature: Double?
    public var maximumResponseTokens: Int?
    public init(sampling: GenerationOptions.SamplingMode? = nil, temperature: Double? = nil, maximumResponseTokens: Int? = nil) {
        self.sampling = sampling
        self.temperature = temperature
        self.maximumResponseTokens = maximumResponseTokens
    }
}

// MARK: - Tool

public protocol Tool<Arguments, Output> : Sendable {
    associatedtype Output : PromptRepresentable
    associatedtype Arguments : ConvertibleFromGeneratedContent
    var name: String { get }
    var description: String { get }
    var parameters: GenerationSchema { get }
    var includesSchemaInInstructions: Bool { get }
#if FM_SDK_26_4
    @concurrent func call(arguments: Self.Arguments) async throws -> Self.Output
#else
    func call(arguments: Self.Arguments) async throws -> Self.Output
#endif
}

extension Tool {
    public var name: String { get { String(describing: Self.self) } }
    public var includesSchemaInInstructions: Bool { get { true } }
}

// MARK: - Transcript (only what GenerationError.Refusal needs)

public struct Transcript : Sendable {
    public enum Entry : Sendable, Identifiable, Equatable { // cases left out: only carried, never built or switched over
        public var id: String { get { switch self {} } }
    }
}

// MARK: - SystemLanguageModel

final public class SystemLanguageModel : Sendable {
    private let storedAvailability: Availability
    let script: MirrorScript
    let storedContextSize: Int
    let countsTokens: Bool
    let guardrails: Guardrails

    final public var availability: SystemLanguageModel.Availability { get { storedAvailability } }
    final public var isAvailable: Bool { get { storedAvailability == .available } }

    /// `contextSize` is also the window the scripted sessions enforce (counted with `MirrorTokenizer`);
    /// `countsTokens: false` makes `tokenCount(for:)` throw, as a model without a tokenizer would.
    public init(mirrorAvailability: Availability = .available, script: MirrorScript = MirrorScript(), contextSize: Int = 4096, countsTokens: Bool = true, mirrorGuardrails: Guardrails = .default) { // mirror-only
        storedAvailability = mirrorAvailability
        self.script = script
        storedContextSize = contextSize
        self.countsTokens = countsTokens
        guardrails = mirrorGuardrails
    }

    /// On Linux no model is available, whatever the guardrails.
    public convenience init(useCase: SystemLanguageModel.UseCase = .general, guardrails: SystemLanguageModel.Guardrails = Guardrails.default) {
        self.init(mirrorAvailability: .unavailable(.deviceNotEligible), mirrorGuardrails: guardrails)
    }
}

extension SystemLanguageModel {
    public struct UseCase : Sendable, Equatable {
        let name: String
        public static let general: SystemLanguageModel.UseCase = UseCase(name: "general")
        public static let contentTagging: SystemLanguageModel.UseCase = UseCase(name: "contentTagging")
    }
}

extension SystemLanguageModel {
    public struct Guardrails : Sendable {
        public let mirrorName: String // mirror-only
        public static let `default`: SystemLanguageModel.Guardrails = Guardrails(mirrorName: "default")
        public static let permissiveContentTransformations: SystemLanguageModel.Guardrails = Guardrails(mirrorName: "permissiveContentTransformations")
    }
}

extension SystemLanguageModel {
    @frozen public enum Availability : Equatable, Sendable {
        public enum UnavailableReason : Equatable, Sendable {
            case deviceNotEligible
            case appleIntelligenceNotEnabled
            case modelNotReady
        }
        case available
        case unavailable(SystemLanguageModel.Availability.UnavailableReason)
    }

    /// On Linux there is no on-device model.
    private static let linuxDefault = SystemLanguageModel(mirrorAvailability: .unavailable(.deviceNotEligible))
#if FM_SDK_26_4
    public static var `default`: SystemLanguageModel { get { linuxDefault } }
#else
    public static let `default`: SystemLanguageModel = linuxDefault
#endif
}

extension SystemLanguageModel.Availability.UnavailableReason : Hashable {
}

#if FM_SDK_26_4
extension SystemLanguageModel {
    nonisolated(nonsending) final public func tokenCount(for prompt: some PromptRepresentable) async throws -> Int {
        try counted(MirrorTokenizer.entry(prompt.promptRepresentation.text))
    }
    nonisolated(nonsending) final public func tokenCount(for instructions: Instructions) async throws -> Int {
        try counted(MirrorTokenizer.entry(instructions.text))
    }
    nonisolated(nonsending) final public func tokenCount(for tools: [any Tool]) async throws -> Int {
        try counted(MirrorTokenizer.tools(tools))
    }

    private func counted(_ tokens: Int) throws -> Int {
        guard countsTokens else {
            throw LanguageModelSession.GenerationError.assetsUnavailable(.init(debugDescription: "no tokenizer"))
        }
        return tokens
    }
}

extension SystemLanguageModel {
    final public var contextSize: Int { get { storedContextSize } }
}
#endif

// MARK: - LanguageModelSession

final public class LanguageModelSession {
    let model: SystemLanguageModel
    let tools: [any Tool]
    let instructions: String?
    private let responding = Mutex(false)

    init(model: SystemLanguageModel, tools: [any Tool], instructionsText: String?) {
        self.model = model
        self.tools = tools
        self.instructions = instructionsText
    }

    final public var isResponding: Bool { get { responding.withLock { $0 } } }

    @_disfavoredOverload
    public convenience init(model: SystemLanguageModel = .default, tools: [any Tool] = [], instructions: String? = nil) {
        self.init(model: model, tools: tools, instructionsText: instructions)
    }

    public convenience init(model: SystemLanguageModel = .default, tools: [any Tool] = [], instructions: Instructions? = nil) {
        self.init(model: model, tools: tools, instructionsText: instructions?.text)
    }
}

extension LanguageModelSession : @unchecked Sendable {
}

extension LanguageModelSession {
    public enum GenerationError : Error, LocalizedError {
        public struct Context : Sendable {
            public let debugDescription: String
            public init(debugDescription: String) { self.debugDescription = debugDescription }
        }
        public struct Refusal : Sendable {
            private let entries: [Transcript.Entry]
            public init(transcriptEntries: [Transcript.Entry]) { entries = transcriptEntries }
        }
        case exceededContextWindowSize(LanguageModelSession.GenerationError.Context)
        case assetsUnavailable(LanguageModelSession.GenerationError.Context)
        case guardrailViolation(LanguageModelSession.GenerationError.Context)
        case unsupportedGuide(LanguageModelSession.GenerationError.Context)
        case unsupportedLanguageOrLocale(LanguageModelSession.GenerationError.Context)
        case decodingFailure(LanguageModelSession.GenerationError.Context)
        case rateLimited(LanguageModelSession.GenerationError.Context)
        case concurrentRequests(LanguageModelSession.GenerationError.Context)
        case refusal(LanguageModelSession.GenerationError.Refusal, LanguageModelSession.GenerationError.Context)
        public var errorDescription: String? { get { "\(self)" } }
        public var recoverySuggestion: String? { get { nil } }
        public var failureReason: String? { get { nil } }
    }

    public struct ToolCallError : Error, LocalizedError {
        public var tool: any Tool
        public var underlyingError: any Error
        public init(tool: any Tool, underlyingError: any Error) {
            self.tool = tool
            self.underlyingError = underlyingError
        }
        public var errorDescription: String? { get { "tool \(tool.name) failed: \(underlyingError)" } }
    }
}

extension LanguageModelSession {
    public struct ResponseStream<Content> where Content : Generable {
        public struct Snapshot {
            public var content: Content.PartiallyGenerated
            public var rawContent: GeneratedContent
        }
        let contents: AsyncThrowingStream<GeneratedContent, any Error>
    }
}

extension LanguageModelSession {
    final public func streamResponse<Content>(to prompt: String, generating type: Content.Type = Content.self, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions()) -> sending LanguageModelSession.ResponseStream<Content> where Content : Generable {
        ResponseStream(contents: start(prompt: prompt, options: options))
    }

    final public func streamResponse(to prompt: Prompt, options: GenerationOptions = GenerationOptions()) -> sending LanguageModelSession.ResponseStream<String> {
        ResponseStream(contents: start(prompt: prompt.text, options: options))
    }

    @_disfavoredOverload
    final public func streamResponse(to prompt: String, options: GenerationOptions = GenerationOptions()) -> sending LanguageModelSession.ResponseStream<String> {
        ResponseStream(contents: start(prompt: prompt, options: options))
    }

    /// Runs the next scripted turn of the model: records the request, calls tools, streams snapshots, throws.
    private func start(prompt: String, options: GenerationOptions) -> AsyncThrowingStream<GeneratedContent, any Error> {
        let busy = responding.withLock { busy in
            defer { busy = true }
            return busy
        }
        let (stream, continuation) = AsyncThrowingStream<GeneratedContent, any Error>.makeStream()
        if busy {
            continuation.finish(throwing: GenerationError.concurrentRequests(.init(debugDescription: "busy")))
            return stream
        }
        let script = model.script
        let tools = tools
        let index = script.record(MirrorRequest(
            instructions: instructions, toolNames: tools.map(\.name),
            toolSchemas: tools.map(\.parameters.debugDescription), prompt: prompt, options: options,
            guardrails: model.guardrails.mirrorName))
        let steps = script.nextTurn()
        // The window the real model enforces: instructions, tool definitions, prompt, every tool call and output,
        // and the response, counted as `tokenCount(for:)` counts them.
        var window = MirrorWindow(size: model.storedContextSize)
        let producer = Task { [self] in
            defer { self.responding.withLock { $0 = false } }
            do {
                try window.add(MirrorTokenizer.entry(instructions ?? "") + MirrorTokenizer.tools(tools)
                               + MirrorTokenizer.entry(prompt))
                for step in steps {
                    try Task.checkCancellation()
                    switch step {
                    case .callTool(let name, let arguments):
                        guard let tool = tools.first(where: { $0.name == name }) else {
                            throw GenerationError.decodingFailure(.init(debugDescription: "no tool named \(name)"))
                        }
                        try window.add(MirrorTokenizer.entry(name + arguments.jsonString))
                        let output = try await LanguageModelSession.invoke(tool, arguments)
                        script.recordToolOutput(request: index, MirrorToolExchange(
                            name: name, arguments: arguments, output: output))
                        try window.add(MirrorTokenizer.entry(output))
                    case .snapshots(let texts):
                        try window.add(MirrorTokenizer.entry(texts.last ?? ""))
                        for text in texts {
                            continuation.yield(GeneratedContent(kind: .string(text)))
                            await Task.yield()
                        }
                    case .fail(let error):
                        throw error
                    case .failWith(let error):
                        throw error
                    case .hang:
                        try await Task.sleep(for: .seconds(3600))
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in producer.cancel() }
        return stream
    }

    private static func invoke<T: Tool>(_ tool: T, _ content: GeneratedContent) async throws -> String {
        do {
            let arguments = try T.Arguments(content)
            return try await tool.call(arguments: arguments).promptRepresentation.text
        } catch {
            throw ToolCallError(tool: tool, underlyingError: error)
        }
    }
}

extension LanguageModelSession.ResponseStream : AsyncSequence {
    public typealias Element = LanguageModelSession.ResponseStream<Content>.Snapshot

    public struct AsyncIterator : AsyncIteratorProtocol {
        var base: AsyncThrowingStream<GeneratedContent, any Error>.Iterator

        public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws -> LanguageModelSession.ResponseStream<Content>.Snapshot? {
            guard let raw = try await base.next(isolation: actor) else { return nil }
            return Snapshot(content: try Content.PartiallyGenerated(raw), rawContent: raw)
        }

        public typealias Element = LanguageModelSession.ResponseStream<Content>.Snapshot
    }

    public func makeAsyncIterator() -> LanguageModelSession.ResponseStream<Content>.AsyncIterator {
        AsyncIterator(base: contents.makeAsyncIterator())
    }
}

// MARK: - Mirror-only scripting for tests

/// The scripted model's deterministic tokenizer (what `tokenCount(for:)` returns, and what its window counts):
/// a quarter token per ASCII byte, half a token per digit, a token per byte of other characters, rounded up, and
/// 3 more per transcript entry. Unlike `TokenEstimator` it counts ASCII lower and non-ASCII text higher.
public enum MirrorTokenizer { // mirror-only
    public static func count(_ text: String) -> Int { // mirror-only
        var quarters = 0
        for byte in text.utf8 {
            quarters += byte >= 0x80 ? 4 : (byte >= 0x30 && byte <= 0x39 ? 2 : 1)
        }
        return (quarters + 3) / 4
    }

    /// One transcript entry: its text and the markers around it.
    public static func entry(_ text: String) -> Int { count(text) + 3 } // mirror-only

    /// Tool definitions as the instructions carry them: name, description and argument schema.
    public static func tools(_ tools: [any Tool]) -> Int { // mirror-only
        tools.reduce(0) { $0 + entry($1.name + $1.description + $1.parameters.debugDescription) }
    }
}

/// A session's window filling up; over its size the response fails as the real one does.
struct MirrorWindow {
    let size: Int
    private(set) var used = 0

    init(size: Int) { self.size = size }

    mutating func add(_ tokens: Int) throws {
        used += tokens
        guard used <= size else {
            throw LanguageModelSession.GenerationError.exceededContextWindowSize(.init(debugDescription:
                "Content contains \(used) tokens, which exceeds the maximum allowed context size of \(size)."))
        }
    }
}

/// One step of a scripted model turn.
public enum MirrorStep: Sendable { // mirror-only
    /// The model calls a registered tool with these arguments (run through the tool's real `call`).
    case callTool(String, GeneratedContent)
    /// The response text as cumulative snapshots, streamed in order.
    case snapshots([String])
    /// The turn fails with a framework error.
    case fail(LanguageModelSession.GenerationError)
    /// The turn fails with any other error (the framework also throws plain NSErrors).
    case failWith(any Error)
    /// The turn never finishes (until cancelled).
    case hang
}

/// What one `streamResponse` call received.
public struct MirrorRequest: Sendable { // mirror-only
    public let instructions: String?
    public let toolNames: [String]
    public let toolSchemas: [String]
    public let prompt: String
    public let options: GenerationOptions
    /// The name of the guardrails of the session's model.
    public let guardrails: String
    public var toolExchanges: [MirrorToolExchange] = []
}

/// One tool call the scripted model made and what the tool returned to it.
public struct MirrorToolExchange: Sendable { // mirror-only
    public let name: String
    public let arguments: GeneratedContent
    public let output: String
}

/// The scripted model behind a mirror `SystemLanguageModel`: each request (each `streamResponse`, in any
/// session on the model) plays the next turn; when the script runs out it answers "(script exhausted)".
public final class MirrorScript: Sendable { // mirror-only
    private struct State {
        var turns: [[MirrorStep]]
        var requests: [MirrorRequest] = []
    }
    private let state: Mutex<State>

    public init(_ turns: [[MirrorStep]] = []) { // mirror-only
        state = Mutex(State(turns: turns))
    }

    /// Every request received so far, in order, with the tool exchanges of its turn.
    public var requests: [MirrorRequest] { state.withLock { $0.requests } } // mirror-only

    func record(_ request: MirrorRequest) -> Int {
        state.withLock { state in
            state.requests.append(request)
            return state.requests.count - 1
        }
    }

    func recordToolOutput(request: Int, _ exchange: MirrorToolExchange) {
        state.withLock { $0.requests[request].toolExchanges.append(exchange) }
    }

    func nextTurn() -> [MirrorStep] {
        state.withLock { state in
            state.turns.isEmpty ? [.snapshots(["(script exhausted)"])] : state.turns.removeFirst()
        }
    }
}
#endif
