import Foundation

/// Names a task or an answer gives, narrowed to files the loop may open itself for an answer's shown code
/// (`ShownCode`): regular files inside the workspace after links are resolved, with no hidden (dot) name on the
/// way. The tools confine again whatever the loop then does with them.
public enum NamedFiles {
    /// The first `limit` of `names` that qualify, each once: as the workspace-relative path the tools take, and
    /// the real path behind it.
    public static func inWorkspace(_ names: [String], workspace: String,
                                   limit: Int) -> [(path: String, real: String)] {
        let root = URL(fileURLWithPath: workspace).resolvingSymlinksInPath().path
        var seen: Set<String> = []
        var found: [(path: String, real: String)] = []
        for name in names where found.count < limit {
            let absolute = name.hasPrefix("/") ? name : workspace + "/" + name
            let path = URL(fileURLWithPath: absolute).standardizedFileURL.path
            let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
            let kind = try? FileManager.default.attributesOfItem(atPath: real)[.type] as? FileAttributeType
            guard path.hasPrefix(workspace + "/"), real.hasPrefix(root + "/"),
                  !real.dropFirst(root.count + 1).split(separator: "/").contains(where: { $0.hasPrefix(".") }),
                  kind == .typeRegular, seen.insert(real).inserted else { continue }
            found.append((String(path.dropFirst(workspace.count + 1)), real))
        }
        return found
    }
}
