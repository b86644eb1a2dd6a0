import Foundation
import Testing
@testable import AppleCodeTools

/// The macOS profile cannot run here, so it is checked as what sandbox-exec reads: S-expressions. The reader
/// below knows SBPL's lexical forms (lists, atoms, "strings" with \" and \\, #"regex" literals, ; comments).
indirect enum SExpr: Equatable, CustomStringConvertible {
    case atom(String)
    case string(String)
    case regex(String)
    case list([SExpr])

    var description: String {
        switch self {
        case .atom(let a): a
        case .string(let s): "\"\(s)\""
        case .regex(let r): "#\"\(r)\""
        case .list(let items): "(" + items.map(\.description).joined(separator: " ") + ")"
        }
    }

    var items: [SExpr] { if case .list(let items) = self { items } else { [] } }
    var head: String? { if case .atom(let a)? = items.first { a } else { nil } }
    /// The operation of a rule `(allow operation filters...)`.
    var operation: String? { if items.count > 1, case .atom(let a) = items[1] { a } else { nil } }

    /// Every expression inside this one, depth first, itself included.
    var all: [SExpr] { [self] + items.flatMap(\.all) }

    static func read(_ text: String) throws -> [SExpr] {
        var reader = SBPLReader(Array(text.unicodeScalars))
        return try reader.readAll()
    }
}

struct SBPLError: Error, CustomStringConvertible { let description: String }

struct SBPLReader {
    let scalars: [Unicode.Scalar]
    var index = 0
    init(_ scalars: [Unicode.Scalar]) { self.scalars = scalars }

    mutating func readAll() throws -> [SExpr] {
        var forms: [SExpr] = []
        while let form = try readForm() { forms.append(form) }
        return forms
    }

    mutating func skipSpaceAndComments() {
        while index < scalars.count {
            if scalars[index].properties.isWhitespace {
                index += 1
            } else if scalars[index] == ";" {
                while index < scalars.count, scalars[index] != "\n" { index += 1 }
            } else {
                return
            }
        }
    }

    mutating func readForm() throws -> SExpr? {
        skipSpaceAndComments()
        guard index < scalars.count else { return nil }
        switch scalars[index] {
        case "(":
            index += 1
            var items: [SExpr] = []
            while true {
                skipSpaceAndComments()
                guard index < scalars.count else { throw SBPLError(description: "unclosed list") }
                if scalars[index] == ")" {
                    index += 1
                    return .list(items)
                }
                guard let item = try readForm() else { throw SBPLError(description: "unclosed list") }
                items.append(item)
            }
        case ")":
            throw SBPLError(description: "unexpected ) at \(index)")
        case "\"":
            index += 1
            return .string(try readString(escapes: true))
        case "#" where index + 1 < scalars.count && scalars[index + 1] == "\"":
            index += 2
            return .regex(try readString(escapes: false))
        default:
            var atom = ""
            while index < scalars.count, !scalars[index].properties.isWhitespace,
                  !["(", ")", "\""].contains(scalars[index]) {
                atom.unicodeScalars.append(scalars[index])
                index += 1
            }
            return .atom(atom)
        }
    }

    mutating func readString(escapes: Bool) throws -> String {
        var out = ""
        while index < scalars.count {
            let c = scalars[index]
            index += 1
            if c == "\"" { return out }
            if escapes, c == "\\" {
                guard index < scalars.count else { break }
                let e = scalars[index]
                index += 1
                guard e == "\"" || e == "\\" else { throw SBPLError(description: "escape \\\(e) in a string") }
                out.unicodeScalars.append(e)
                continue
            }
            if c.value < 0x20 { throw SBPLError(description: "control character in a string") }
            out.unicodeScalars.append(c)
        }
        throw SBPLError(description: "unterminated string")
    }
}

/// The profile's top-level rules as read, and questions about them.
struct ReadProfile {
    let forms: [SExpr]
    init() throws { forms = try SExpr.read(SeatbeltProfile.text) }

    /// The top-level rules `(action operation ...)` for one action, in order, with their position.
    func rules(_ action: String) -> [(index: Int, rule: SExpr)] {
        forms.enumerated().filter { $0.element.head == action }.map { ($0.offset, $0.element) }
    }

    /// The position of the first top-level rule `(action operation filters...)` that names `operation`.
    func firstIndex(_ action: String, _ operation: String) -> Int? {
        rules(action).first { $0.rule.items.dropFirst().contains(.atom(operation)) }?.index
    }

    /// The names of every `(param "NAME")`.
    var parameters: Set<String> {
        Set(forms.flatMap(\.all).compactMap { expr in
            guard expr.head == "param", expr.items.count == 2, case .string(let name) = expr.items[1] else { return nil }
            return name
        })
    }

    /// Every string literal in the profile.
    var strings: [String] { forms.flatMap(\.all).compactMap { if case .string(let s) = $0 { s } else { nil } } }
}

@Suite struct SeatbeltProfileTests {
    static let folders = SeatbeltFolders(tmp: "/private/tmp", varTmp: "/private/var/tmp",
                                         tmpdir: "/private/var/folders/xy/abc/T",
                                         userTemp: "/private/var/folders/xy/abc/T",
                                         userCache: "/private/var/folders/xy/abc/C")

    @Test func profileReadsAsRulesAfterItsVersion() throws {
        let profile = try ReadProfile()
        #expect(profile.forms.first == .list([.atom("version"), .atom("1")]))
        for form in profile.forms.dropFirst() {
            #expect(["allow", "deny"].contains(form.head ?? ""), "\(form)")
        }
    }

    /// No path is written into the profile; each is a `-D` parameter, passed verbatim, and the
    /// profile reads exactly the parameters the argv defines.
    @Test func pathsArePassedAsParametersNeverWrittenIntoTheProfile() throws {
        let workspace = "/Users/me/we\"ird\\dir\u{1}x(y) ;z"
        let argv = CommandSandbox.seatbelt(executable: SeatbeltProfile.executable, folders: Self.folders)
            .argv(command: "make test", workspace: workspace)
        #expect(Array(argv.prefix(3)) == [SeatbeltProfile.executable, "-p", SeatbeltProfile.text])
        #expect(Array(argv.suffix(4)) == ["--", "/bin/sh", "-c", "make test"])
        let definitions = Array(argv.dropFirst(3).dropLast(4))
        #expect(definitions == ["-DWORKSPACE=\(workspace)", "-DTMP=/private/tmp", "-DVAR_TMP=/private/var/tmp",
                                "-DTMPDIR=/private/var/folders/xy/abc/T", "-DUSER_TEMP=/private/var/folders/xy/abc/T",
                                "-DUSER_CACHE=/private/var/folders/xy/abc/C", "-DGIT_HOOKS_PATH=\(workspace)/.git/hooks"])
        let defined = Set(definitions.map { String($0.dropFirst(2).prefix { $0 != "=" }) })
        let profile = try ReadProfile()
        #expect(profile.parameters == defined)
        // The only literal paths left are devices.
        #expect(profile.strings.filter { $0.hasPrefix("/") && !$0.hasPrefix("/dev/") } == [])
        #expect(!SeatbeltProfile.text.contains("/Users/"))
    }

    @Test func writesAreDeniedBeforeTheAllowedPlaces() throws {
        let profile = try ReadProfile()
        // In SBPL the last matching rule wins: the blanket deny must come first.
        let deny = try #require(profile.firstIndex("deny", "file-write*"))
        let allow = try #require(profile.firstIndex("allow", "file-write*"))
        #expect(deny < allow)
        let allowed = profile.forms[allow].items.dropFirst(2).map(\.description)
        #expect(allowed.contains(#"(subpath (param "WORKSPACE"))"#))
        #expect(allowed.contains(#"(subpath (param "TMPDIR"))"#))
        // The compiler's module cache lives under the per-user cache folder (clang/ModuleCache),
        // Apple's tools write the per-user temp folder whatever $TMPDIR says.
        #expect(allowed.contains(#"(subpath (param "USER_TEMP"))"#))
        #expect(allowed.contains(#"(subpath (param "USER_CACHE"))"#))
    }

    /// No terminal is writable (commands also run in a session of their own, without one).
    @Test func terminalsAreNotWritable() throws {
        let profile = try ReadProfile()
        let allowedWrites = profile.rules("allow").filter { $0.rule.items.contains(.atom("file-write*")) }
            .flatMap { $0.rule.all }
        #expect(!allowedWrites.contains(.string("/dev/tty")))
        // A terminal device only together with the pty extension the sandbox gives terminals made inside it.
        let ttyRegexes = allowedWrites.filter { if case .regex(let r) = $0 { r.hasPrefix("^/dev/tty") } else { false } }
        let extensionOnly = allowedWrites.filter { $0.head == "require-all" }.filter {
            $0.items.contains(.list([.atom("extension"), .string("com.apple.sandbox.pty")]))
        }
        #expect(ttyRegexes.count == extensionOnly.count)
        #expect(extensionOnly.allSatisfy { rule in ttyRegexes.contains { rule.all.contains($0) } })
    }

    /// Programs started through LaunchServices (`open`), Apple events (`osascript`), launchd
    /// jobs (`launchctl submit`) or another program's preferences run outside the profile: all denied, after
    /// `(allow default)` and never allowed again further down (the last matching rule wins).
    @Test func waysOutAreDenied() throws {
        let profile = try ReadProfile()
        let allowDefault = try #require(profile.firstIndex("allow", "default"))
        for operation in ["lsopen", "appleevent-send", "job-creation", "user-preference-write"] {
            let deny = try #require(profile.firstIndex("deny", operation), "\(operation) is not denied")
            #expect(deny > allowDefault)
            #expect(profile.firstIndex("allow", operation) == nil, "\(operation) is allowed again")
        }
        let lookups = profile.rules("deny").filter { $0.rule.items.dropFirst().first == .atom("mach-lookup") }
        let services = lookups.flatMap { $0.rule.all }.compactMap { expr -> String? in
            guard expr.head == "global-name", case .string(let name)? = expr.items.last else { return nil }
            return name
        }
        #expect(Set(services).isSuperset(of: ["com.apple.coreservices.launchservicesd", "com.apple.launchservicesd",
                                              "com.apple.coreservices.appleevents"]))
        #expect(lookups.allSatisfy { $0.index > allowDefault })
        #expect(profile.firstIndex("allow", "mach-lookup") == nil)
    }

    /// Loopback works as under bwrap (a test that starts a local server runs alike), Unix-domain
    /// sockets inside the workspace too; every other address stays denied.
    @Test func networkIsLoopbackOnly() throws {
        let profile = try ReadProfile()
        let deny = try #require(profile.firstIndex("deny", "network*"))
        let allowed = profile.rules("allow").filter { $0.rule.operation?.hasPrefix("network") == true }
        #expect(allowed.allSatisfy { $0.index > deny })
        let texts = Set(allowed.map(\.rule.description))
        #expect(texts == [
            #"(allow network-bind (local ip "*:*"))"#,
            #"(allow network-inbound (local ip "localhost:*"))"#,
            #"(allow network-outbound (remote ip "localhost:*"))"#,
            #"(allow network-bind (local unix-socket (subpath (param "WORKSPACE"))))"#,
            #"(allow network-outbound (remote unix-socket (subpath (param "WORKSPACE"))))"#,
        ])
        // The Mac's loopback is shared with its own services: the two that act as the user are refused.
        let refused = profile.rules("deny").map(\.rule.description)
        #expect(refused.contains(#"(deny network-outbound (remote ip "localhost:22") (remote ip "localhost:5900"))"#))
        #expect((profile.firstIndex("deny", "network-outbound") ?? 0) > (allowed.map(\.index).max() ?? 99))
    }

    /// Inside the workspace no `.git` is made, replaced or removed and no repository's hooks or
    /// config are written (git runs them later, outside any sandbox); these denies come after the allowed writes.
    @Test func gitHooksAndConfigAreNotWritable() throws {
        let profile = try ReadProfile()
        let allow = try #require(profile.firstIndex("allow", "file-write*"))
        let all = profile.rules("deny").filter { $0.index > allow && $0.rule.operation == "file-write*" }
        // The folder core.hooksPath names inside the workspace is denied too (GitInternalsTests, SandboxTests).
        let hooksPath = all.filter { $0.rule.description.contains(#"(subpath (param "GIT_HOOKS_PATH"))"#) }
        #expect(hooksPath.count == 1)
        let denies = all.filter { !$0.rule.description.contains("GIT_HOOKS_PATH") }
        let regexes = denies.map { rule in
            rule.rule.all.compactMap { if case .regex(let r) = $0 { r } else { nil } }
        }
        #expect(denies.allSatisfy { $0.rule.description.contains(#"(require-all (subpath (param "WORKSPACE"))"#) })
        #expect(regexes.flatMap { $0 }.sorted() == [
            #"/\.git$"#,
            #"/\.git/((modules|worktrees)/[^/]+/)*(hooks|config|config\.worktree)(/.*)?$"#,
        ])
        let git = try Regex(#"/\.git/((modules|worktrees)/[^/]+/)*(hooks|config|config\.worktree)(/.*)?$"#)
        for path in ["/w/.git/hooks", "/w/.git/hooks/pre-commit", "/w/.git/config", "/w/sub/.git/config",
                     "/w/.git/modules/lib/hooks/post-checkout", "/w/.git/worktrees/b/config.worktree"] {
            #expect(path.contains(git), "\(path)")
        }
        for path in ["/w/.git/index", "/w/.git/objects/ab/cd", "/w/.git/refs/heads/config2", "/w/hooks/x",
                     "/w/.gitconfig", "/w/.git/info/config-notes"] {
            #expect(!path.contains(git), "\(path)")
        }
        #expect("/w/sub/.git".contains(try Regex(#"/\.git$"#)))
        #expect(!"/w/.gitignore".contains(try Regex(#"/\.git$"#)))
    }

    /// Programs that open a pseudo-terminal (`script`, expect-style tests) work as under bwrap's own /dev: the
    /// multiplexer, and only terminals made inside the sandbox (they carry the sandbox's pty extension).
    @Test func newPseudoTerminalsAreWritable() throws {
        let profile = try ReadProfile()
        let rules = profile.rules("allow").map(\.rule.description)
        #expect(rules.contains(#"(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))"#))
        #expect(rules.contains(#"(allow file-read* file-write* file-ioctl (require-all (regex #"^/dev/ttys[0-9]+$") (extension "com.apple.sandbox.pty")))"#))
        #expect(profile.forms.contains(.list([.atom("allow"), .atom("pseudo-tty")])))
    }

    @Test func foldersAreRealPathsAndFallBackToTmp() {
        let real: (String) -> String? = {
            ["/tmp": "/private/tmp", "/var/tmp": "/private/var/tmp", "/var/folders/x/T/": "/private/var/folders/x/T",
             "/var/folders/x/C/": "/private/var/folders/x/C", "/Users/me": "/Users/me", "/": "/"][$0]
        }
        let resolved = SeatbeltFolders.resolve(tmpdir: "/var/folders/x/T/", userTemp: "/var/folders/x/T/",
                                               userCache: "/var/folders/x/C/", homes: ["/Users/me"], realPath: real)
        #expect(resolved == SeatbeltFolders(tmp: "/private/tmp", varTmp: "/private/var/tmp",
                                            tmpdir: "/private/var/folders/x/T", userTemp: "/private/var/folders/x/T",
                                            userCache: "/private/var/folders/x/C"))
        // Unset, missing, or a folder that would open everything ($TMPDIR=$HOME): /tmp instead.
        let fallback = SeatbeltFolders.resolve(tmpdir: nil, userTemp: "/gone", userCache: "/Users/me",
                                               homes: ["/Users/me"], realPath: real)
        #expect([fallback.tmpdir, fallback.userTemp, fallback.userCache] == Array(repeating: "/private/tmp", count: 3))
        #expect(SeatbeltFolders.resolve(tmpdir: "/", userTemp: nil, userCache: nil, homes: [], realPath: real).tmpdir
            == "/private/tmp")
    }
}
