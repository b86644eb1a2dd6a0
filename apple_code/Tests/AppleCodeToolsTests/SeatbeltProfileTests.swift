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
    init(_ text: String = SeatbeltProfile.text()) throws { forms = try SExpr.read(text) }

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
        let texts = [SeatbeltProfile.text(), SeatbeltProfile.text(holding: 2, others: 3, deniedPorts: [8787, 22])]
        for text in texts {
            let profile = try ReadProfile(text)
            #expect(profile.forms.first == .list([.atom("version"), .atom("1")]))
            for form in profile.forms.dropFirst() {
                #expect(["allow", "deny"].contains(form.head ?? ""), "\(form)")
            }
        }
    }

    /// Closed by default; only the operations named here are ever allowed, signals and process
    /// inspection only inside the sandbox, and nothing is allowed by default again.
    @Test func everythingIsDeniedButWhatIsNamed() throws {
        let profile = try ReadProfile(SeatbeltProfile.text(holding: 1, others: 2, deniedPorts: [8787]))
        #expect(profile.forms.dropFirst().first == .list([.atom("deny"), .atom("default")]))
        #expect(profile.firstIndex("allow", "default") == nil)
        let allowed = Set(profile.rules("allow").flatMap { rule in
            rule.rule.items.dropFirst().prefix { if case .atom = $0 { true } else { false } }
                .compactMap { if case .atom(let a) = $0 { a } else { nil } }
        })
        #expect(allowed == ["process-exec", "process-fork", "signal", "process-info*", "sysctl-read", "ipc-posix-sem",
                            "ipc-posix-shm-read*", "user-preference-read", "system-socket", "dynamic-code-generation",
                            "mach-lookup", "file-read*", "file-map-executable", "file-test-existence", "file-write*",
                            "file-ioctl", "pseudo-tty", "network-bind",
                            "network-inbound", "network-outbound"])
        let descriptions = profile.rules("allow").map(\.rule.description)
        #expect(descriptions.contains("(allow signal (target same-sandbox))"))
        #expect(descriptions.contains("(allow process-info* (target same-sandbox))"))
        #expect(descriptions.filter { $0.contains("signal") || $0.contains("process-info") }.count == 2)
    }

    /// Mach services only those a toolchain needs, each with its reason written above it.
    @Test func machLookupsAreTheListedServicesEachWithAReason() throws {
        let text = SeatbeltProfile.text()
        let profile = try ReadProfile(text)
        let looked = profile.rules("allow").filter { $0.rule.operation == "mach-lookup" }.flatMap { $0.rule.all }
            .compactMap { expr -> String? in
                guard expr.head == "global-name", case .string(let name)? = expr.items.last else { return nil }
                return name
            }
        #expect(looked == SeatbeltProfile.machServices.map(\.name))
        for service in SeatbeltProfile.machServices {
            #expect(!service.reason.isEmpty)
            #expect(text.contains("; \(service.reason)\n(allow mach-lookup (global-name \"\(service.name)\"))"))
        }
        for refused in ["com.apple.coreservices.launchservicesd", "com.apple.coreservices.appleevents",
                        "com.apple.pasteboard.1", "com.apple.SecurityServer", "com.apple.dnssd.service"] {
            #expect(!looked.contains(refused))
        }
    }

    /// No path is written into the profile; each is a `-D` parameter, passed verbatim, and the
    /// profile reads exactly the parameters the argv defines.
    @Test func pathsArePassedAsParametersNeverWrittenIntoTheProfile() throws {
        let workspace = "/Users/me/we\"ird\\dir\u{1}x(y) ;z"
        let argv = CommandSandbox.seatbelt(executable: SeatbeltProfile.executable, folders: Self.folders)
            .argv(command: "make test", workspace: workspace, hidden: HiddenPaths(paths: []))
        #expect(Array(argv.prefix(3)) == [SeatbeltProfile.executable, "-p", SeatbeltProfile.text()])
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
        #expect(!SeatbeltProfile.text().contains("/Users/"))
    }

    /// Every hidden path is a parameter the profile denies reading and writing, after the allowed
    /// reads and writes (the last matching rule wins); a hidden folder that holds the workspace is denied all but
    /// the workspace.
    @Test func hiddenPathsAreUnreadableAfterEverythingAllowed() throws {
        let workspace = "/Users/me/.apple-flow/demo"
        let hidden = HiddenPaths(paths: ["/Users/me/.ssh", "/Users/me/.apple-flow", "/Users/me/.apple-flow/demo/.env",
                                         "/Users/me/Library/Messages"])
        let argv = SeatbeltProfile.argv(executable: SeatbeltProfile.executable, workspace: workspace,
                                        folders: Self.folders, hidden: hidden, deniedPorts: [])
        let definitions = argv.filter { $0.hasPrefix("-DHIDDEN_") }
        #expect(definitions == ["-DHIDDEN_0=/Users/me/.apple-flow", "-DHIDDEN_1=/Users/me/.ssh",
                                "-DHIDDEN_2=/Users/me/.apple-flow/demo/.env", "-DHIDDEN_3=/Users/me/Library/Messages"])
        let profile = try ReadProfile(argv[2])
        #expect(profile.parameters.isSuperset(of: ["HIDDEN_0", "HIDDEN_1", "HIDDEN_2", "HIDDEN_3"]))
        let lastAllow = try #require(profile.rules("allow").map(\.index).max())
        let denies = profile.rules("deny").filter { $0.rule.description.contains("HIDDEN_") }
        #expect(denies.count == 4 && denies.allSatisfy { $0.index > lastAllow })
        #expect(denies[0].rule.description == #"(deny file-read-data file-read-xattr file-map-executable file-write* (require-all (subpath (param "HIDDEN_0")) (require-not (subpath (param "WORKSPACE")))))"#)
        for (offset, index) in (1...3).enumerated() {
            #expect(denies[offset + 1].rule.description == #"(deny file-read* file-map-executable file-write* (subpath (param "HIDDEN_\#(index)")))"#)
        }
    }

    /// Loopback only, as under bwrap (a test that starts a local server runs alike), Unix-domain
    /// sockets inside the workspace too; the Mac's Remote Login, Screen Sharing and the daemon's web page are
    /// refused after the loopback is allowed.
    @Test func networkIsLoopbackOnlyAndNeverTheWebPort() throws {
        let profile = try ReadProfile(SeatbeltProfile.text(deniedPorts: [8787, 22]))
        let allowed = profile.rules("allow").filter { $0.rule.operation?.hasPrefix("network") == true }
        #expect(Set(allowed.map(\.rule.description)) == [
            #"(allow network-bind (local ip "*:*"))"#,
            #"(allow network-inbound (local ip "localhost:*"))"#,
            #"(allow network-outbound (remote ip "localhost:*"))"#,
            #"(allow network-bind (local unix-socket (subpath (param "WORKSPACE"))))"#,
            #"(allow network-outbound (remote unix-socket (subpath (param "WORKSPACE"))))"#,
        ])
        let refused = profile.rules("deny").filter { $0.rule.operation == "network-outbound" }
        #expect(refused.map(\.rule.description) == [
            #"(deny network-outbound (remote ip "localhost:22") (remote ip "localhost:5900") (remote ip "localhost:8787"))"#,
        ])
        #expect(refused.allSatisfy { $0.index > (allowed.map(\.index).max() ?? 99) })
        let argv = SeatbeltProfile.argv(executable: SeatbeltProfile.executable, workspace: "/w", folders: Self.folders,
                                        deniedPorts: [8787])
        #expect(argv[2].contains(#"(remote ip "localhost:8787")"#))
    }

    @Test func writesAreTheAllowedPlacesOnly() throws {
        let profile = try ReadProfile()
        let allows = profile.rules("allow").filter { $0.rule.items.contains(.atom("file-write*")) }
        let allowed = allows.flatMap { $0.rule.items.dropFirst(2).map(\.description) }
        #expect(allowed.contains(#"(subpath (param "WORKSPACE"))"#))
        #expect(allowed.contains(#"(subpath (param "TMPDIR"))"#))
        // The compiler's module cache lives under the per-user cache folder (clang/ModuleCache),
        // Apple's tools write the per-user temp folder whatever $TMPDIR says.
        #expect(allowed.contains(#"(subpath (param "USER_TEMP"))"#))
        #expect(allowed.contains(#"(subpath (param "USER_CACHE"))"#))
        #expect(!allowed.contains { $0.contains("HOME") || $0 == "(subpath \"/\")" })
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
        // TIOCSTI is an ioctl: none is allowed on any other terminal.
        let ioctls = profile.rules("allow").filter { $0.rule.items.contains(.atom("file-ioctl")) }
        #expect(ioctls.count == 2)
    }

    /// Programs started through LaunchServices (`open`), Apple events (`osascript`), launchd
    /// jobs (`launchctl submit`) or another program's preferences run outside the profile: never allowed, and
    /// named in denies at the end so that no allow can open them.
    @Test func waysOutAreDenied() throws {
        let profile = try ReadProfile()
        let lastAllow = try #require(profile.rules("allow").map(\.index).max())
        for operation in ["lsopen", "appleevent-send", "job-creation", "user-preference-write"] {
            let deny = try #require(profile.firstIndex("deny", operation), "\(operation) is not denied")
            #expect(deny > lastAllow)
            #expect(profile.firstIndex("allow", operation) == nil, "\(operation) is allowed")
        }
        let lookups = profile.rules("deny").filter { $0.rule.operation == "mach-lookup" }
        let services = lookups.flatMap { $0.rule.all }.compactMap { expr -> String? in
            guard expr.head == "global-name", case .string(let name)? = expr.items.last else { return nil }
            return name
        }
        #expect(Set(services) == ["com.apple.coreservices.launchservicesd", "com.apple.launchservicesd",
                                  "com.apple.coreservices.appleevents"])
        #expect(lookups.allSatisfy { $0.index > lastAllow })
    }

    /// Inside the workspace no `.git` is made, replaced or removed and no repository's hooks or
    /// config are written (git runs them later, outside any sandbox), in any letter case; these denies come after
    /// the allowed writes.
    @Test func gitHooksAndConfigAreNotWritableInAnyLetterCase() throws {
        let profile = try ReadProfile()
        let lastAllow = try #require(profile.rules("allow").map(\.index).max())
        let all = profile.rules("deny").filter { $0.index > lastAllow && $0.rule.operation == "file-write*" }
            .filter { !$0.rule.description.contains("HIDDEN_") }
        // The folder core.hooksPath names inside the workspace is denied too (GitInternalsTests, SandboxTests).
        #expect(all.filter { $0.rule.description.contains(#"(subpath (param "GIT_HOOKS_PATH"))"#) }.count == 1)
        let denies = all.filter { !$0.rule.description.contains("GIT_HOOKS_PATH") }
        #expect(denies.allSatisfy { $0.rule.description.contains(#"(require-all (subpath (param "WORKSPACE"))"#) })
        let regexes = denies.flatMap { rule in rule.rule.all.compactMap { if case .regex(let r) = $0 { r } else { nil } } }
        #expect(regexes == [SeatbeltProfile.gitFolderPattern, SeatbeltProfile.gitInternalsPattern])
        #expect(SeatbeltProfile.anyCase(".git") == #"\.[gG][iI][tT]"#)
        let git = try Regex(SeatbeltProfile.gitInternalsPattern)
        for path in ["/w/.git/hooks", "/w/.git/hooks/pre-commit", "/w/.git/config", "/w/sub/.git/config",
                     "/w/.git/modules/lib/hooks/post-checkout", "/w/.git/worktrees/b/config.worktree",
                     "/w/.GIT/hooks/pre-commit", "/w/.Git/Hooks", "/w/.git/CONFIG", "/w/.gIt/MODULES/x/HOOKS/a",
                     "/w/.git/WorkTrees/b/Config.Worktree", "/w/.git/commondir", "/w/.git/worktrees/b/commondir",
                     "/w/.git/worktrees/b/gitdir", "/w/.git/modules/libs/a/config", "/w/.git/modules/a/b/c/hooks/x",
                     "/w/.git/info/attributes", "/w/.git/info/config-notes", "/w/.git/CommonDir",
                     "/w/sub/.git/modules/x/commondir"] {
            #expect(path.contains(git), "\(path)")
        }
        for path in ["/w/.git/index", "/w/.git/objects/ab/cd", "/w/.git/refs/heads/config2", "/w/hooks/x",
                     "/w/.gitconfig", "/w/.git/objects/info/packs", "/w/.git/commondir2", "/w/.GITX/hooks"] {
            #expect(!path.contains(git), "\(path)")
        }
        let folder = try Regex(SeatbeltProfile.gitFolderPattern)
        #expect("/w/sub/.git".contains(folder) && "/w/.GIT".contains(folder) && "/w/a/.Git".contains(folder))
        #expect(!"/w/.gitignore".contains(folder))
    }

    /// A folder inside the workspace that holds a hidden path may not be renamed or removed (the hidden path
    /// would be uncovered under the new name): each is a parameter and a deny after every allow.
    @Test func foldersHoldingAHiddenPathCannotBeRenamed() throws {
        let ws = try TempWorkspace()
        try ws.write("sub/deeper/secret.txt", "key\n")
        let argv = SeatbeltProfile.argv(executable: "/usr/bin/sandbox-exec", workspace: ws.path,
                                        folders: SandboxProbeTests.folders,
                                        hidden: HiddenPaths(paths: [ws.path + "/sub/deeper/secret.txt"]))
        #expect(argv.contains("-DHIDDEN_HOLDER_0=\(ws.path)/sub") && argv.contains("-DHIDDEN_HOLDER_1=\(ws.path)/sub/deeper"))
        let profile = argv[2]
        #expect(profile.contains(#"(deny file-write-unlink (literal (param "HIDDEN_HOLDER_1")))"#))
        #expect(!profile.contains("HIDDEN_HOLDER_2"))
        #expect(!SeatbeltProfile.text().contains("HIDDEN_HOLDER"))
    }

    /// sysctl reads are the listed names and prefixes, each with its reason above it; not every sysctl (another
    /// process's arguments, kern.procargs2, among them).
    @Test func sysctlReadsAreTheListedOnesEachWithAReason() throws {
        let text = SeatbeltProfile.text()
        let profile = try ReadProfile(text)
        let rules = profile.rules("allow").filter { $0.rule.operation == "sysctl-read" }.map(\.rule.description)
        #expect(rules == SeatbeltProfile.sysctls.map { sysctl in
            "(allow sysctl-read (\(sysctl.name.hasSuffix(".") ? "sysctl-name-prefix" : "sysctl-name") \"\(sysctl.name)\"))"
        })
        #expect(!text.contains("(allow sysctl-read)\n"))
        for sysctl in SeatbeltProfile.sysctls {
            #expect(!sysctl.reason.isEmpty && text.contains("; \(sysctl.reason)\n(allow sysctl-read"), "\(sysctl.name)")
        }
        for name in ["kern.procargs2", "kern.proc.all", "kern.proc.pid.1", "security.mac.lockdown_mode_state"] {
            #expect(!SeatbeltProfile.sysctls.contains { $0.name == name || ($0.name.hasSuffix(".") && name.hasPrefix($0.name)) },
                    "\(name)")
        }
    }

    /// Unix-domain sockets: in the workspace, and in the commands' own temporary folder when there is one (pytest's
    /// tmp_path, multiprocessing's Manager), which is their TMPDIR; never the shared /tmp or the user's $TMPDIR.
    @Test func unixSocketsInTheCommandsOwnTemporaryFolder() throws {
        let plain = try ReadProfile(SeatbeltProfile.text())
        #expect(!plain.rules("allow").contains { $0.rule.description.contains("SOCKETS") })
        let profile = try ReadProfile(SeatbeltProfile.text(sockets: true))
        let sockets = profile.rules("allow").map(\.rule.description).filter { $0.contains("unix-socket") }
        #expect(sockets == [
            #"(allow network-bind (local unix-socket (subpath (param "WORKSPACE"))))"#,
            #"(allow network-outbound (remote unix-socket (subpath (param "WORKSPACE"))))"#,
            #"(allow network-bind (local unix-socket (subpath (param "SOCKETS"))))"#,
            #"(allow network-outbound (remote unix-socket (subpath (param "SOCKETS"))))"#,
        ])
        var folders = SandboxProbeTests.folders
        folders.sockets = "/tmp/apple-code-commands-ab12"
        let argv = CommandSandbox.seatbelt(executable: "/usr/bin/sandbox-exec", folders: folders)
            .argv(command: "pytest", workspace: "/w", hidden: HiddenPaths(paths: []), deniedPorts: [])
        #expect(argv.contains("-DSOCKETS=/tmp/apple-code-commands-ab12") && argv[2].contains(#"(param "SOCKETS")"#))
        #expect(Array(argv.suffix(5)) == ["/usr/bin/env", "TMPDIR=/tmp/apple-code-commands-ab12/", "/bin/sh", "-c",
                                          "pytest"])
        let made = try #require(SeatbeltFolders.makeCommandsTemp(in: NSTemporaryDirectory()))
        defer { rmdir(made) }
        var info = stat()
        #expect(stat(made, &info) == 0 && info.st_mode & 0o777 == 0o700)
    }

    /// The model server's port when it is on this machine: denied to commands (its API can fetch from the network).
    @Test(arguments: [("http://127.0.0.1:11434/v1", 11434), ("http://localhost:8765/v1", 8765),
                      ("http://[::1]:8080/v1", 8080), ("http://127.0.0.1/v1", 80), ("https://api.openai.com/v1", nil),
                      ("http://192.168.1.5:11434/v1", nil), ("not a url", nil)] as [(String, Int?)])
    func theModelServersLoopbackPort(url: String, port: Int?) {
        #expect(SeatbeltFolders.loopbackPort(of: url) == port)
    }

    @Test func theModelServersPortIsDeniedUnlessTheOwnerAllowsIt() {
        let url = "http://127.0.0.1:11434/v1"
        #expect(SeatbeltProfile.deniedPorts(named: [8787], modelURL: url, environment: [:]) == [8787, 11434])
        #expect(SeatbeltProfile.deniedPorts(named: [8787], modelURL: url, environment: ["APPLE_CODE_MODEL_PORT_OPEN": "1"])
            == [8787])
        #expect(SeatbeltProfile.deniedPorts(named: [11434], modelURL: url, environment: [:]) == [11434])
        #expect(SeatbeltProfile.deniedPorts(named: [], modelURL: "https://api.openai.com/v1", environment: [:]) == [])
        #expect(SeatbeltProfile.deniedPorts(named: [1], modelURL: nil, environment: [:]) == [1])
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
