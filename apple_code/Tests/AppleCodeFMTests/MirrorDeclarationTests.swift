import Foundation
import Testing

/// Checks, line by line, that every public declaration of FoundationModelsMirror is a declaration of the real
/// framework: same scope, same names, labels, types, `throws`/`async`, defaults and conformances, against the
/// SDK interface dumps in apple_code/Interfaces (26.1, and 26.4 for code under `#if FM_SDK_26_4`).
@Suite struct MirrorDeclarationTests {
    static let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func read(_ path: String) throws -> String {
        try String(contentsOf: package.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func everyMirrorDeclarationIsInTheInterfaceDumps() throws {
        let mirror = InterfaceScan(try Self.read("Sources/FoundationModelsMirror/Mirror.swift"), mirror: true)
        let dumps = [
            "26.1": InterfaceScan(try Self.read("Interfaces/FoundationModels-26.1.decl.txt"), mirror: false),
            "26.4": InterfaceScan(try Self.read("Interfaces/FoundationModels-26.4.decl.txt"), mirror: false),
        ]
        let problems = mirror.mismatches(against: dumps)
        #expect(problems.isEmpty, "mirror declarations not in the dumps:\n\(problems.joined(separator: "\n"))")
        let missing = mirror.omissions(against: dumps)
        #expect(missing.isEmpty, "requirements or cases the mirror leaves out:\n\(missing.joined(separator: "\n"))")
        // The scan must really have looked at the mirror's API (a parser that finds nothing passes trivially).
        #expect(mirror.entries.count > 100)
        #expect(mirror.entries.contains { $0.path == "LanguageModelSession.GenerationError" && $0.text.hasPrefix("case refusal") })
    }

    @Test func aWrongDeclarationIsReported() {
        let dump = InterfaceScan("""
            public struct GenerationSchema : Sendable, Codable {
                public init(root: DynamicGenerationSchema, dependencies: [DynamicGenerationSchema]) throws
            }
            public protocol Tool<Arguments, Output> : Sendable {
                func call(arguments: Self.Arguments) async throws -> Self.Output
            }
            """, mirror: false)
        let mirror = InterfaceScan("""
            public struct GenerationSchema : Sendable, Hashable {
                public init(root: DynamicGenerationSchema, dependencies: [DynamicGenerationSchema]) {
                    fatalError()
                }
                public init(debugDescription: String) { self.debugDescription = debugDescription } // mirror-only
            }
            public protocol Tool<Arguments, Output> : Sendable {
            #if FM_SDK_26_4
                @concurrent func call(arguments: Self.Arguments) async throws -> Self.Output
            #else
                func call(arguments: Self.Arguments) async throws -> Self.Output
            #endif
            }
            """, mirror: true)
        let problems = mirror.mismatches(against: ["26.1": dump, "26.4": dump])
        #expect(problems == [
            "26.1 GenerationSchema: conformance Hashable",
            "26.4 GenerationSchema: conformance Hashable",
            "26.1 GenerationSchema: public init(root: DynamicGenerationSchema, dependencies: [DynamicGenerationSchema])",
            "26.4 GenerationSchema: public init(root: DynamicGenerationSchema, dependencies: [DynamicGenerationSchema])",
            "26.4 Tool: @concurrent func call(arguments: Self.Arguments) async throws -> Self.Output",
        ])
    }

    /// Frozenness decides whether a switch needs `@unknown default` (an error in Swift 6 mode when missing), and a
    /// protocol requirement or enum case the mirror leaves out would let code compile here that fails on a Mac.
    @Test func frozennessAndLeftOutRequirementsAndCasesAreReported() {
        let dump = InterfaceScan("""
            public protocol Tool<Arguments, Output> : Sendable {
                var name: String { get }
                var includesSchemaInInstructions: Bool { get }
            }
            extension SystemLanguageModel {
                @frozen public enum Availability : Equatable, Sendable {
                    case available
                    case unavailable(SystemLanguageModel.Availability.UnavailableReason)
                }
            }
            extension LanguageModelSession {
                public enum GenerationError : Error, LocalizedError {
                    case rateLimited(LanguageModelSession.GenerationError.Context)
                    case concurrentRequests(LanguageModelSession.GenerationError.Context)
                }
            }
            public struct Transcript : Sendable {
                public enum Entry : Sendable {
                    case prompt(Transcript.Prompt)
                }
            }
            """, mirror: false)
        let mirror = InterfaceScan("""
            public protocol Tool<Arguments, Output> : Sendable {
                var name: String { get }
            }
            extension SystemLanguageModel {
                public enum Availability : Equatable, Sendable {
                    case available
                    case unavailable(SystemLanguageModel.Availability.UnavailableReason)
                }
            }
            extension LanguageModelSession {
                @frozen public enum GenerationError : Error, LocalizedError {
                    case rateLimited(LanguageModelSession.GenerationError.Context)
                }
            }
            public struct Transcript : Sendable {
                public enum Entry : Sendable { // cases left out: only carried, never built or switched over
                }
            }
            """, mirror: true)
        let dumps = ["26.1": dump]
        #expect(mirror.mismatches(against: dumps) == [
            "26.1 SystemLanguageModel.Availability: public enum Availability : Equatable, Sendable",
            "26.1 LanguageModelSession.GenerationError: @frozen public enum GenerationError : Error, LocalizedError",
        ])
        #expect(mirror.omissions(against: dumps) == [
            "26.1 Tool lacks var includesSchemaInInstructions: Bool { get }",
            "26.1 LanguageModelSession.GenerationError lacks case concurrentRequests(LanguageModelSession.GenerationError.Context)",
        ])
    }

    /// The backend, and every test file compiled on a Mac, uses no mirror-only API (`// mirror-only` declarations
    /// are named Mirror*, or take a `mirror...:` label) and imports the mirror only where FoundationModels is absent.
    @Test func codeBuiltOnAMacUsesNoMirrorOnlyAPI() throws {
        var checked = 0
        for folder in ["Sources/AppleCodeFM", "Tests/AppleCodeFMTests", "Tests/AppleCodePlanTests"] {
            let url = Self.package.appendingPathComponent(folder)
            for file in try FileManager.default.contentsOfDirectory(atPath: url.path).sorted()
            where file.hasSuffix(".swift") && file != "MirrorDeclarationTests.swift" {
                let lines = try String(contentsOf: url.appendingPathComponent(file), encoding: .utf8)
                    .split(separator: "\n", omittingEmptySubsequences: false).map { String($0) }
                let problems = Self.macOnlyProblems(lines)
                #expect(problems.isEmpty, "\(folder)/\(file): \(problems)")
                checked += 1
            }
        }
        #expect(checked >= 10)
    }

    @Test func mirrorUseInCodeBuiltOnAMacIsReported() {
        let linuxOnly = ["// Linux only", "#if !canImport(FoundationModels)", "import FoundationModelsMirror",
                         "let model = SystemLanguageModel(mirrorAvailability: .available)", "#endif"]
        #expect(Self.macOnlyProblems(linuxOnly).isEmpty)
        let both = ["#if canImport(FoundationModels)", "import FoundationModels", "#else",
                    "import FoundationModelsMirror", "#endif",
                    "let model = SystemLanguageModel(mirrorAvailability: .available)"]
        #expect(Self.macOnlyProblems(both) == ["let model = SystemLanguageModel(mirrorAvailability: .available)"])
        #expect(Self.macOnlyProblems(["import FoundationModelsMirror"]) == ["import FoundationModelsMirror"])
    }

    /// Lines of a file that a Mac would compile and that name the mirror. A file whose code is all inside
    /// `#if !canImport(FoundationModels)` is not compiled there; elsewhere the mirror may only be imported in the
    /// `#else` of `#if canImport(FoundationModels)`.
    static func macOnlyProblems(_ lines: [String]) -> [String] {
        let code = lines.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("//") }
        if code.first == "#if !canImport(FoundationModels)" { return [] }
        var problems: [String] = []
        for (index, line) in code.enumerated() where line.range(of: "mirror", options: .caseInsensitive) != nil {
            let guarded = line == "import FoundationModelsMirror" && index >= 3 && code[index - 1] == "#else"
                && code[index - 3] == "#if canImport(FoundationModels)"
            if !guarded { problems.append(line) }
        }
        return problems
    }
}

/// The declarations of a Swift interface (or of the mirror's source), each with its enclosing scope.
struct InterfaceScan {
    struct Entry {
        /// Enclosing type, e.g. "LanguageModelSession.ResponseStream".
        let path: String
        /// The normalised declaration: attributes the dump drops removed, bodies cut, `{ get }` for properties.
        let text: String
        /// For a type or an extension: its path and conformances.
        let declaredType: String?
        let conformances: [String]
        /// The SDK variants this line is compiled for (mirror only).
        let variants: Set<String>
    }

    private struct Scope {
        let path: String
        /// Declarations directly inside are API: public types, protocols (requirements), enums (cases).
        let api: Bool
        let isProtocol: Bool
        let isEnum: Bool
        let skipped: Bool
    }

    private(set) var entries: [Entry] = []
    /// Type path -> every conformance declared on it or on its extensions.
    private(set) var conformances: [String: Set<String>] = [:]
    /// Mirror enums marked `// cases left out` (carried as values only, never built or switched over).
    private(set) var partialEnums: Set<String> = []

    init(_ text: String, mirror: Bool) {
        var scopes: [Scope] = []
        var variants: [Set<String>] = [["26.1", "26.4"]]
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: true) {
            var line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("//") { continue }
            if line == "}" {
                if !scopes.isEmpty { scopes.removeLast() }
                continue
            }
            if line.hasPrefix("#") {
                if line == "#if FM_SDK_26_4" { variants.append(["26.4"]) }
                else if line.hasPrefix("#if") { variants.append(variants.last ?? []) }
                else if line == "#else", variants.count > 1, variants.last == ["26.4"] { variants[variants.count - 1] = ["26.1"] }
                else if line == "#endif", variants.count > 1 { variants.removeLast() }
                continue
            }
            let mirrorOnly = mirror && line.hasSuffix("// mirror-only")
            if let comment = line.range(of: " // ") { line = String(line[..<comment.lowerBound]) }
            let braces = Self.braceBalance(line)
            let parent = scopes.last
            // Inside a function body, or an excluded scope: only follow the braces.
            if let parent, parent.skipped || (!parent.api && parent.path.hasSuffix("{body}")) {
                Self.follow(braces, into: &scopes, with: Scope(path: parent.path, api: false, isProtocol: false,
                                                               isEnum: false, skipped: parent.skipped))
                continue
            }
            if line.hasPrefix("@"), !line.contains(" ") || line.hasPrefix("@available") || line.hasPrefix("@backDeployed")
                || ["@_disfavoredOverload", "@discardableResult"].contains(line) {
                continue
            }
            for attribute in ["@resultBuilder ", "@InstructionsBuilder ", "@PromptBuilder ",
                              "@_disfavoredOverload "] {
                line = line.replacingOccurrences(of: attribute, with: "")
            }
            let basePath = parent?.path ?? ""
            if let type = Self.typeDeclaration(line) {
                let path = basePath.isEmpty ? type.name : "\(basePath).\(type.name)"
                let isAPI = line.contains("public ") || (parent?.isProtocol ?? false)
                if mirror && rawLine.contains("// cases left out") { partialEnums.insert(path) }
                if isAPI && !mirrorOnly {
                    entries.append(Entry(path: basePath, text: type.header, declaredType: path,
                                         conformances: type.conformances, variants: variants.last ?? []))
                    conformances[path, default: []].formUnion(type.conformances)
                }
                Self.follow(braces, into: &scopes, with: Scope(
                    path: path, api: isAPI, isProtocol: type.kind == "protocol", isEnum: type.kind == "enum",
                    skipped: mirrorOnly || !isAPI))
                continue
            }
            if line.hasPrefix("extension ") {
                let ext = Self.extensionDeclaration(line)
                if !mirrorOnly && !ext.conformances.isEmpty {
                    entries.append(Entry(path: ext.path, text: line, declaredType: ext.path,
                                         conformances: ext.conformances, variants: variants.last ?? []))
                    conformances[ext.path, default: []].formUnion(ext.conformances)
                }
                Self.follow(braces, into: &scopes, with: Scope(path: ext.path, api: true, isProtocol: false,
                                                               isEnum: false, skipped: mirrorOnly))
                continue
            }
            let isAPI = (parent?.isProtocol ?? false) || ((parent?.isEnum ?? false) && line.hasPrefix("case "))
                || line.hasPrefix("public ") || line.contains(" public ")
            if isAPI && !mirrorOnly && parent?.api != false {
                entries.append(Entry(path: basePath, text: Self.normalise(line), declaredType: nil, conformances: [],
                                     variants: variants.last ?? []))
            }
            Self.follow(braces, into: &scopes, with: Scope(path: basePath + "{body}", api: false, isProtocol: false,
                                                           isEnum: false, skipped: mirrorOnly))
        }
    }

    /// What in `self` (the mirror) is missing from the dumps, one line per problem and SDK variant.
    func mismatches(against dumps: [String: InterfaceScan]) -> [String] {
        var problems: [String] = []
        for entry in entries {
            for variant in entry.variants.sorted() {
                guard let dump = dumps[variant] else { continue }
                if let type = entry.declaredType {
                    let known = dump.conformances[type]
                    if entry.text.hasPrefix("extension") == false,
                       !dump.entries.contains(where: { $0.declaredType == type && Self.stem($0.text) == Self.stem(entry.text) }) {
                        problems.append("\(variant) \(type): \(entry.text)")
                    }
                    for conformance in entry.conformances where !(known ?? []).contains(conformance) {
                        problems.append("\(variant) \(type): conformance \(conformance)")
                    }
                } else if !dump.entries.contains(where: { $0.path == entry.path && $0.text == entry.text }) {
                    problems.append("\(variant) \(entry.path): \(entry.text)")
                }
            }
        }
        return problems
    }

    /// What the dumps declare that a conformer or a switch depends on and the mirror leaves out: every
    /// requirement of a protocol the mirror declares, every case of an enum it declares (unless marked partial).
    /// (Extension members of a protocol are `public`; its requirements never are.)
    func omissions(against dumps: [String: InterfaceScan]) -> [String] {
        var problems: [String] = []
        for type in entries {
            guard let path = type.declaredType, !type.text.hasPrefix("extension"), !partialEnums.contains(path),
                  let kind = type.text.range(of: #"\b(protocol|enum) "#, options: .regularExpression).map({ type.text[$0] })
            else { continue }
            let isProtocol = kind.hasPrefix("protocol")
            for variant in type.variants.sorted() {
                guard let dump = dumps[variant] else { continue }
                for required in dump.entries where required.path == path && required.declaredType == nil
                    && (isProtocol ? !required.text.hasPrefix("public ") : required.text.hasPrefix("case ")) {
                    let present = entries.contains {
                        $0.path == path && $0.text == required.text && $0.variants.contains(variant)
                    }
                    if !present { problems.append("\(variant) \(path) lacks \(required.text)") }
                }
            }
        }
        return problems
    }

    // MARK: - Line parsing

    private static func follow(_ braces: Int, into scopes: inout [Scope], with scope: Scope) {
        if braces > 0 { for _ in 0..<braces { scopes.append(scope) } }
        if braces < 0 { scopes.removeLast(min(-braces, scopes.count)) }
    }

    /// `{` minus `}` outside string literals.
    private static func braceBalance(_ line: String) -> Int {
        var balance = 0
        var inString = false
        var escaped = false
        for character in line {
            if inString {
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == "\"" { inString = false }
                continue
            }
            switch character {
            case "\"": inString = true
            case "{": balance += 1
            case "}": balance -= 1
            default: break
            }
        }
        return balance
    }

    /// The declaration without its body: `{ get }` for a property, nothing for a function, no initial value.
    private static func normalise(_ line: String) -> String {
        var depth = 0
        var inString = false
        var cut = line.endIndex
        var assignment: String.Index?
        var index = line.startIndex
        while index < line.endIndex {
            let character = line[index]
            if inString {
                if character == "\"" { inString = false }
            } else {
                switch character {
                case "\"": inString = true
                case "(", "[": depth += 1
                case ")", "]": depth -= 1
                case "=" where depth == 0 && assignment == nil:
                    let next = line.index(after: index)
                    let previous = index > line.startIndex ? line[line.index(before: index)] : " "
                    if previous == " ", next < line.endIndex, line[next] == " " { assignment = index }
                case "{" where depth == 0:
                    cut = index
                default: break
                }
                if cut != line.endIndex { break }
            }
            index = line.index(after: index)
        }
        let isProperty = line.range(of: #"\b(var|let) "#, options: .regularExpression) != nil
            && !line.contains("func ") && !line.contains("init(")
        var text = String(line[..<cut]).trimmingCharacters(in: .whitespaces)
        if isProperty, let assignment, assignment < cut, !line.contains("typealias") {
            text = String(line[..<assignment]).trimmingCharacters(in: .whitespaces)
        }
        if isProperty && cut != line.endIndex { text += " { get }" }
        return text.replacingOccurrences(of: #"\s+"#, with: " ", options: .regularExpression)
    }

    private static func typeDeclaration(_ line: String) -> (kind: String, name: String, header: String, conformances: [String])? {
        let pattern = #"^((?:@frozen |public |final |indirect |open )*)(struct|enum|class|protocol|actor) (\w+)"#
        guard let match = line.range(of: pattern, options: .regularExpression) else { return nil }
        let words = line[match].split(separator: " ")
        guard let name = words.last, let kind = words.dropLast().last else { return nil }
        let header = String(line[..<(line.lastIndex(of: "{") ?? line.endIndex)]).trimmingCharacters(in: .whitespaces)
        return (String(kind), String(name), header, conformanceList(header))
    }

    private static func extensionDeclaration(_ line: String) -> (path: String, conformances: [String]) {
        let header = String(line.dropFirst("extension ".count).prefix { $0 != "{" }).trimmingCharacters(in: .whitespaces)
        let path = String(header.prefix { $0 != " " && $0 != ":" && $0 != "<" })
        return (path, conformanceList(header))
    }

    /// `X<T> : A, @unchecked B where ...` -> ["A", "B"].
    private static func conformanceList(_ header: String) -> [String] {
        let declaration = header.range(of: " where ").map { String(header[..<$0.lowerBound]) } ?? header
        guard let colon = declaration.range(of: " : ") ?? declaration.range(of: ": ") else { return [] }
        return declaration[colon.upperBound...].split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "@unchecked ", with: "")
                .replacingOccurrences(of: "nonisolated ", with: "")
        }
    }

    /// A type header without its conformance list: kind, name, generic parameters, where clause.
    private static func stem(_ header: String) -> String {
        let whereRange = header.range(of: " where ")
        let declaration = whereRange.map { String(header[..<$0.lowerBound]) } ?? header
        let whereClause = whereRange.map { String(header[$0.lowerBound...]) } ?? ""
        guard let colon = declaration.range(of: " : ") else { return header }
        return String(declaration[..<colon.lowerBound]) + whereClause
    }
}
