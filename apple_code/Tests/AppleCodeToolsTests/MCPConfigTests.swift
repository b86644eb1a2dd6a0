import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

/// `--mcp-config`: the file's rules, and which schemas become parameters (the servers themselves are exercised by
/// tests/apple_code/test_mcp_client.py, against a server written with the MCP SDK).
@Suite struct MCPConfigTests {
    @Test func readsTheStdioServersWithTheirEnvironmentTimeoutAndTheAllowlist() throws {
        let config = try MCPConfig.parse("""
            {"mcpServers": {"notes": {"command": "notes-mcp", "args": ["--stdio"], "env": {"A": "1"}, "timeout": 5},
                            "bare": {"command": "/bin/true"}},
             "allowedTools": ["mcp__notes__search"]}
            """)
        #expect(config.servers.map(\.name) == ["notes", "bare"])
        #expect(config.servers[0].args == ["--stdio"] && config.servers[0].env == ["A": "1"])
        #expect(config.servers[0].timeoutSeconds == 5)
        #expect(config.servers[1].timeoutSeconds == MCPServerConfig.defaultTimeout && config.servers[1].env.isEmpty)
        #expect(config.allowedTools == ["mcp__notes__search"])
    }

    @Test(arguments: [
        ("{}", "no \"mcpServers\" object"),
        (#"{"mcpServers": {"web": {"url": "https://example.com"}}}"#, "only stdio servers are supported"),
        (#"{"mcpServers": {"a b": {"command": "x"}}}"#, "server name 'a b'"),
        (#"{"mcpServers": {"s": {"command": "x", "args": [1]}}}"#, "\"args\" must be an array of strings"),
        (#"{"mcpServers": {"s": {"command": "x", "env": {"A": 1}}}}"#, "\"env\" must be an object of strings"),
        (#"{"mcpServers": {"s": {"command": "x", "timeout": 0}}}"#, "\"timeout\" must be seconds"),
        (#"{"mcpServers": {}, "allowedTools": "all"}"#, "\"allowedTools\" must be an array"),
        ("not json", "not JSON"),
    ])
    func aBadFileSaysWhatIsWrong(text: String, message: String) {
        do {
            _ = try MCPConfig.parse(text)
            Issue.record("accepted: \(text)")
        } catch {
            #expect("\(error)".contains(message))
        }
    }

    @Test func aFlatSchemaBecomesParametersAndAnyOtherIsProxied() throws {
        let flat = try JSONValue.parse("""
            {"type": "object", "properties": {"word": {"type": "string", "description": "w"},
             "times": {"type": "integer"}, "loud": {"type": "boolean"}}, "required": ["word"]}
            """)
        let parameters = try #require(MCPTool.flatParameters(flat))
        #expect(parameters == [ParameterSpec("word", .string, "w"), ParameterSpec("times", .integer, "", required: false),
                               ParameterSpec("loud", .boolean, "", required: false)])
        for other in [#"{"type": "object", "properties": {"items": {"type": "array"}}}"#,
                      #"{"type": "object", "properties": {"n": {"type": "number"}}}"#,
                      #"{"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"]}}}"#] {
            #expect(MCPTool.flatParameters(try JSONValue.parse(other)) == nil)
        }
    }

    @Test func aSchemaOfTheToolsOwnIsSentAsItIsAndItsArgumentsPassThrough() throws {
        let schema = try JSONValue.parse(#"{"type": "object", "properties": {"items": {"type": "array"}}}"#)
        let spec = ToolSpec(name: "mcp__s__tags", description: "Join tags.",
                            parameters: [ParameterSpec("arguments", .string, "the JSON object")], schema: schema)
        #expect(spec.jsonSchema == schema)
        let given = try JSONValue.parse(#"{"items": ["a", 1]}"#)
        #expect(try spec.validate(given).get().values["items"] == .array(["a", 1]))
        #expect(throws: ToolArgumentError.self) { try spec.validate("not an object").get() }
    }

    @Test func aCommandIsFoundOnThePathGivenOrTakenAsAPath() {
        #expect(MCPConnection.resolve("sh", searchPath: "/nonexistent:/bin") == "/bin/sh")
        #expect(MCPConnection.resolve("sh", searchPath: "/nonexistent") == nil)
        #expect(MCPConnection.resolve("/bin/sh", searchPath: "") == "/bin/sh")
    }
}
