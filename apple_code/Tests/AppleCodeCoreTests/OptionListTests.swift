import Foundation
import Testing
@testable import AppleCodeCore

/// The options are declared once (`OptionParser.options`): the parser and the usage text come from that list, and
/// CONTRACT.md's options table must say the same, so none of the three can drift from the others. Likewise its
/// title's contract version and its example `start` event's `version` must be this build's.
@Suite struct OptionListTests {
    static let contract = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("CONTRACT.md")

    /// `--name VALUE` of every option in the first column of the contract's "## Options" table (a cell may hold
    /// several, each in backticks; `\|` is a `|` of the value).
    static func contractOptions() throws -> [String] {
        let text = try String(contentsOf: contract, encoding: .utf8)
        let section = try #require(text.components(separatedBy: "\n## Options\n").dropFirst().first)
            .components(separatedBy: "\n## ")[0]
        var options: [String] = []
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let cell = line.dropFirst(2).replacingOccurrences(of: "\\|", with: "\u{0}")
                .split(separator: "|", maxSplits: 1)[0]
            let quoted = cell.split(separator: "`", omittingEmptySubsequences: false)
            options += stride(from: 1, to: quoted.count, by: 2).map {
                quoted[$0].replacingOccurrences(of: "\u{0}", with: "|")
            }
        }
        return options
    }

    @Test func theContractTableListsExactlyTheDeclaredOptions() throws {
        let declared = OptionParser.options.map(\.synopsis)
        let documented = try Self.contractOptions()
        #expect(documented.count > 10, "no options table found in \(Self.contract.path)")
        #expect(Set(documented).subtracting(declared).sorted() == [], "in CONTRACT.md, not declared")
        #expect(Set(declared).subtracting(documented).sorted() == [], "declared, not in CONTRACT.md")
        #expect(documented.count == Set(documented).count, "an option twice in CONTRACT.md")
    }

    @Test func theContractNamesThisBuildsVersions() throws {
        let lines = try String(contentsOf: Self.contract, encoding: .utf8).split(separator: "\n")
        #expect(lines.first { $0.hasPrefix("# ") }
                == "# `apple-code` command-line contract (version \(AppleCodeVersion.contract))")
        let start = try #require(lines.first { $0.contains(#"{"type":"start""#) },
                                 "no example start event in \(Self.contract.path)")
        let afterKey = try #require(String(start).components(separatedBy: #""version":""#).dropFirst().first,
                                    "the example start event has no version")
        #expect(String(afterKey.prefix { $0 != "\"" }) == AppleCodeVersion.current)
    }

    @Test func theUsageTextHasOneLineForEveryOptionAndNoOther() {
        let optionLines = OptionParser.usage.split(separator: "\n").filter { $0.hasPrefix("  -") }
        let expected = OptionParser.options.map { spec in ([spec.synopsis] + spec.aliases).joined(separator: ", ") }
        #expect(optionLines.map { $0.split(separator: "  ")[0].trimmingCharacters(in: .whitespaces) } == expected)
        #expect(OptionParser.usage.split(separator: "\n").allSatisfy { $0.count <= 112 })
    }

    @Test func everyDeclaredOptionIsParsedAsDeclared() throws {
        let names = OptionParser.options.flatMap { [$0.name] + $0.aliases }
        #expect(names.count == Set(names).count, "an option declared twice")
        for spec in OptionParser.options {
            switch spec.effect {
            case .value:
                let needs = spec.name == "--verify-rounds" ? ["--verify", "make test"] : []
                let args = [spec.name, valid(spec.name), "--plan"] + needs + ["x"]
                #expect(throws: Never.self, "\(args)") { try parse(args).get() }
                #expect(parse([spec.name]) == .failure(UsageError("\(spec.name) needs a value")))
            case .flag(let field):
                let args = spec.name == "--parallel" ? ["--plan", "--read-only", spec.name, "x"]
                    : spec.name == "--fallback-openai" ? ["--model", "m", spec.name, "x"] : [spec.name, "x"]
                guard case .run(let options)? = try? parse(args).get() else {
                    Issue.record("\(args) is not a run")
                    continue
                }
                #expect(options[keyPath: field], "\(spec.name) did not set its field")
                #expect(parse([spec.name + "=1", "x"]) == .failure(UsageError("\(spec.name) takes no value")))
            case .command:
                #expect(throws: Never.self, "\(spec.name)") { try parse([spec.name]).get() }
                #expect(parse([spec.name + "=1"]) == .failure(UsageError("\(spec.name) takes no value")))
            }
        }
    }

    private func parse(_ args: [String]) -> Result<Command, UsageError> {
        OptionParser.parse(args, environment: [:], prompt: PromptSource(stdinIsTerminal: true) { "" })
    }

    private func valid(_ name: String) -> String {
        switch name {
        case "--backend": "openai"
        case "--base-url": "http://127.0.0.1:1/v1"
        case "--output-format": "json"
        case "--timeout", "--max-turns", "--context-tokens", "--max-subtasks", "--verify-rounds", "--deny-port",
             "--max-tokens": "3"
        case "--temperature": "0.5"
        default: "v"
        }
    }
}
