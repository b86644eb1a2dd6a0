import AppleCodeCore
import Foundation

/// `--mcp-config FILE`: the `mcpServers` JSON that Claude Code, Cursor and others read. Only stdio servers
/// (`command`, `args`, `env`); each may add `timeout` (seconds a request may take, default 60). The top-level
/// `allowedTools` (names as offered, `mcp__<server>__<tool>`) is what a catalog too big for the window is cut to.
public struct MCPServerConfig: Sendable, Equatable {
    public let name: String
    public let command: String
    public let args: [String]
    /// The whole environment the server gets: nothing of apple-code's own is passed on.
    public let env: [String: String]
    public let timeoutSeconds: Double

    public static let defaultTimeout: Double = 60
}

public struct MCPConfig: Sendable, Equatable {
    public let servers: [MCPServerConfig]
    public let allowedTools: [String]?

    public struct Problem: Error, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Reads and checks the file; a problem says what is wrong with it.
    public static func load(path: String) throws -> MCPConfig {
        guard let data = FileManager.default.contents(atPath: path) else { throw Problem("cannot read \(path)") }
        guard let text = String(data: data, encoding: .utf8) else { throw Problem("\(path) is not UTF-8 text") }
        return try parse(text)
    }

    public static func parse(_ text: String) throws -> MCPConfig {
        let root: JSONValue
        do { root = try JSONValue.parse(text) } catch { throw Problem("not JSON: \(error)") }
        guard let servers = root["mcpServers"]?.objectValue else {
            throw Problem("no \"mcpServers\" object")
        }
        var parsed: [MCPServerConfig] = []
        for (name, value) in servers.entries {
            guard name.range(of: "^[A-Za-z0-9_-]{1,32}$", options: .regularExpression) != nil else {
                throw Problem("server name '\(name)': use 1 to 32 letters, digits, '-' or '_' (it becomes part of tool "
                    + "names)")
            }
            guard let command = value["command"]?.stringValue, !command.isEmpty else {
                throw Problem("server '\(name)': only stdio servers are supported: \"command\" is missing")
            }
            var args: [String] = []
            if let list = value["args"] {
                guard let items = list.arrayValue, items.allSatisfy({ $0.stringValue != nil }) else {
                    throw Problem("server '\(name)': \"args\" must be an array of strings")
                }
                args = items.compactMap(\.stringValue)
            }
            var env: [String: String] = [:]
            if let object = value["env"] {
                guard let entries = object.objectValue?.entries, entries.allSatisfy({ $0.value.stringValue != nil }) else {
                    throw Problem("server '\(name)': \"env\" must be an object of strings")
                }
                for (key, value) in entries { env[key] = value.stringValue }
            }
            var timeout = MCPServerConfig.defaultTimeout
            if let given = value["timeout"] {
                guard let seconds = given.doubleValue, seconds > 0, seconds <= 3600 else {
                    throw Problem("server '\(name)': \"timeout\" must be seconds, above 0 and at most 3600")
                }
                timeout = seconds
            }
            parsed.append(MCPServerConfig(name: name, command: command, args: args, env: env, timeoutSeconds: timeout))
        }
        var allowed: [String]?
        if let list = root["allowedTools"] {
            guard let items = list.arrayValue, items.allSatisfy({ $0.stringValue != nil }) else {
                throw Problem("\"allowedTools\" must be an array of tool names (mcp__<server>__<tool>)")
            }
            allowed = items.compactMap(\.stringValue)
        }
        return MCPConfig(servers: parsed, allowedTools: allowed)
    }
}
