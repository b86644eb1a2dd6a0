import AppleCodeCore
import Foundation

/// The files a run has seen, so that it edits only what it has read: `editFile` is refused until a `readFile` of
/// that file has worked in this run (a file the run wrote or edited itself counts as seen). Small models otherwise
/// edit text they imagine (an `oldText` that is not there, again and again); the refusal says what to do instead,
/// as an ordinary tool error. `writeFile` replaces a file whole, needs no text from it, and is left alone.
struct SeenFiles {
    let workspace: String
    private var seen: Set<String> = []

    init(workspace: String) { self.workspace = workspace }

    /// Why the call may not run yet, or nil.
    func refusal(tool: String, arguments: JSONValue?) -> String? {
        guard tool == "editFile", let path = Self.path(arguments), let key = key(path),
              FileManager.default.fileExists(atPath: key), !seen.contains(key) else { return nil }
        return "editFile: \(path) has not been read in this task; call readFile on it first, then copy oldText "
            + "exactly from what it shows"
    }

    /// The files read or written so far (absolute), in no particular order.
    var paths: [String] { seen.sorted() }

    /// Notes a call that worked.
    mutating func note(tool: String, arguments: JSONValue?, ok: Bool) {
        guard ok, ["readFile", "editFile", "writeFile"].contains(tool), let path = Self.path(arguments) else { return }
        noteRead(path)
    }

    /// Notes a file the model has seen without a call (shown with the task).
    mutating func noteRead(_ path: String) {
        if let key = key(path) { seen.insert(key) }
    }

    private static func path(_ arguments: JSONValue?) -> String? {
        guard let path = arguments?["path"]?.stringValue, !path.isEmpty else { return nil }
        return path
    }

    /// The path as the tools take it, made absolute and without `.`/`..` (lexically: both sides of the comparison
    /// are made the same way; the tools themselves resolve links and confine).
    private func key(_ path: String) -> String? {
        let absolute = path.hasPrefix("/") ? path : workspace + "/" + path
        return URL(fileURLWithPath: absolute).standardizedFileURL.path
    }
}
