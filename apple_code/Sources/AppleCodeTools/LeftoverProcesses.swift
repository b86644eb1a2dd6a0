#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Finds what a command left running wherever it went: into another process group or session (`setsid`), or
/// reparented after a daemonizing fork, where killing the command's process group cannot reach it. Each command
/// gets a marker variable in its environment (`APPLE_CODE_COMMAND=<token>`); environment variables are inherited
/// through fork and exec, so every process of this user that holds the marker, plus the descendants of those, is
/// the command's descendant tree. Only a process that cleared or rewrote its environment (`env -i`) and left the
/// process group escapes this; under bubblewrap the command's PID namespace catches that one too.
enum LeftoverProcesses {
    static let variable = "APPLE_CODE_COMMAND"

    /// A fresh marker token for one command.
    static func newToken() -> String { UUID().uuidString }

    /// The environment entry a command carries.
    static func entry(token: String) -> String { "\(variable)=\(token)" }

    /// Sends `signal` to every process holding `token` and to their descendants; how many there were.
    @discardableResult
    static func send(_ signal: Int32, token: String) -> Int {
        let targets = find(token: token)
        for pid in targets { _ = kill(pid, signal) }
        return targets.count
    }

    /// SIGKILLs everything holding `token` until two looks in a row find nothing: a process may fork while it
    /// is killed, and one caught in the middle of exec shows an empty environment for a moment.
    static func killAll(token: String, rounds: Int = 20) {
        var quiet = 0
        for round in 0..<rounds where quiet < 2 {
            if round > 0 { usleep(5_000) }
            quiet = send(SIGKILL, token: token) == 0 ? quiet + 1 : 0
        }
    }

    /// The pids holding `token` in their environment, with their descendants; never this process or PID 1.
    static func find(token: String) -> Set<pid_t> {
        let marker = Array(entry(token: token).utf8)
        let table = ProcessTable.snapshot()
        let own = getpid()
        let marked = table.lazy.filter { $0.pid != own && $0.pid > 1 }
            .filter { ProcessTable.startupStrings(of: $0.pid).map { holds($0, entry: marker) } ?? false }
            .map(\.pid)
        return descendants(of: Set(marked), in: table).subtracting([own, 1])
    }

    /// `roots` and every process below them in `table` (by parent pid).
    static func descendants(of roots: Set<pid_t>, in table: [ProcessTable.Entry]) -> Set<pid_t> {
        var children: [pid_t: [pid_t]] = [:]
        for entry in table { children[entry.ppid, default: []].append(entry.pid) }
        var found = roots
        var queue = Array(roots)
        while let pid = queue.popLast() {
            for child in children[pid] ?? [] where found.insert(child).inserted { queue.append(child) }
        }
        return found
    }

    /// Whether NUL-separated `strings` hold `entry` as one whole string.
    static func holds(_ strings: [UInt8], entry: [UInt8]) -> Bool {
        guard !entry.isEmpty, strings.count >= entry.count else { return false }
        var start = 0
        while start + entry.count <= strings.count {
            let end = strings[start...].firstIndex(of: 0) ?? strings.count
            if end - start == entry.count, strings[start..<end].elementsEqual(entry) { return true }
            start = end + 1
        }
        return false
    }
}

/// This user's processes as the kernel lists them, and the strings each was started with.
enum ProcessTable {
    struct Entry: Sendable, Equatable {
        var pid: pid_t
        var ppid: pid_t
    }

    #if os(Linux)
    /// Every process in /proc with its parent (others' processes are listed too; their environment is unreadable).
    static func snapshot() -> [Entry] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return names.compactMap { name in
            guard let pid = pid_t(name), let stat = readFile("/proc/\(name)/stat", limit: 4096) else { return nil }
            return parentFromStat(stat).map { Entry(pid: pid, ppid: $0) }
        }
    }

    /// The environment block of `pid` (NUL-separated `NAME=value` strings); nil when unreadable or gone.
    static func startupStrings(of pid: pid_t) -> [UInt8]? { readFile("/proc/\(pid)/environ", limit: 1 << 20) }

    /// The parent pid from /proc/PID/stat: `pid (comm) state ppid ...`, where comm may hold spaces and `)`.
    static func parentFromStat(_ stat: [UInt8]) -> pid_t? {
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = stat[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 1 else { return nil }
        return pid_t(String(decoding: fields[1], as: UTF8.self))
    }

    /// A /proc file read whole (its size shows as 0, so it is read until end of file), at most `limit` bytes.
    private static func readFile(_ path: String, limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 8192)
        while bytes.count < limit {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes.append(contentsOf: chunk[..<count])
            } else if count == 0 || errno != EINTR {
                break
            }
        }
        return bytes
    }
    #elseif canImport(Darwin)
    /// This user's processes with their parents (sysctl KERN_PROC_UID).
    static func snapshot() -> [Entry] {
        var mib: [Int32] = [CTL_KERN, KERN_PROC, KERN_PROC_UID, Int32(bitPattern: getuid())]
        var size = 0
        guard sysctl(&mib, u_int(mib.count), nil, &size, nil, 0) == 0, size > 0 else { return [] }
        // Room for processes started between the two calls.
        let capacity = size / MemoryLayout<kinfo_proc>.stride + 32
        var processes = [kinfo_proc](repeating: kinfo_proc(), count: capacity)
        size = capacity * MemoryLayout<kinfo_proc>.stride
        guard sysctl(&mib, u_int(mib.count), &processes, &size, nil, 0) == 0 else { return [] }
        return processes.prefix(size / MemoryLayout<kinfo_proc>.stride).map {
            Entry(pid: $0.kp_proc.p_pid, ppid: $0.kp_eproc.e_ppid)
        }
    }

    /// The strings `pid` was started with (sysctl KERN_PROCARGS2: argc, the executable path, then argv and the
    /// environment, NUL-separated); nil when unreadable or gone.
    static func startupStrings(of pid: pid_t) -> [UInt8]? {
        var mib: [Int32] = [CTL_KERN, KERN_PROCARGS2, pid]
        var size = 0
        guard sysctl(&mib, u_int(mib.count), nil, &size, nil, 0) == 0, size > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: size)
        guard sysctl(&mib, u_int(mib.count), &buffer, &size, nil, 0) == 0 else { return nil }
        return Array(buffer.prefix(size))
    }
    #else
    static func snapshot() -> [Entry] { [] }
    static func startupStrings(of pid: pid_t) -> [UInt8]? { nil }
    #endif
}
