#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Low-level file access for the tools: opening only regular files, streaming lines without loading a whole
/// file, telling text from binary, and writing without following a final symlink.
enum FileIO {
    /// Bytes examined to tell text from binary.
    static let sniffBytes = 8192
    /// A line longer than this is shown cut (minified files, data on one line).
    static let maxLineBytes = 1000

    /// Opens an existing regular file for reading. Non-blocking open, so a FIFO swapped in after the check
    /// cannot hang the call; the type is checked again on the open descriptor.
    static func openForReading(_ path: String, shown: String) throws -> Int32 {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw ToolFailure("cannot open \(shown) (\(errorText(errno)))") }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw ToolFailure("\(shown) is not a regular file; refused")
        }
        return fd
    }

    /// Opens a resolved path that must be an existing regular text file (readFile, editFile); a missing one's
    /// failure names what the workspace holds near it (`Workspace.requireFile`).
    static func openText(_ target: Workspace.Resolved, in workspace: Workspace) throws -> Int32 {
        try workspace.requireFile(target)
        let fd = try openForReading(target.absolute, shown: target.relative)
        if looksBinary(fd: fd) {
            close(fd)
            let size = Workspace.fileSize(target.absolute)
            throw ToolFailure("\(target.relative) is a binary file (\(size) bytes); the file tools handle UTF-8 text only")
        }
        return fd
    }

    /// Whether the start of the file looks binary: a NUL byte, or bytes that are not UTF-8.
    static func looksBinary(fd: Int32) -> Bool {
        var sample = [UInt8](repeating: 0, count: sniffBytes)
        let count = sample.withUnsafeMutableBytes { pread(fd, $0.baseAddress, sniffBytes, 0) }
        guard count > 0 else { return false }
        return looksBinary(Array(sample[..<count]), complete: count < sniffBytes)
    }

    static func looksBinary(_ bytes: [UInt8], complete: Bool) -> Bool {
        if bytes.contains(0) { return true }
        // A sample cut mid-character is still text: allow up to three trailing bytes of an unfinished character.
        let allowance = complete ? 0 : min(3, bytes.count)
        for drop in 0...allowance where String(validating: bytes.dropLast(drop), as: UTF8.self) != nil {
            return false
        }
        return true
    }

    /// Streams the file line by line (1-based). Lines from `first` on are decoded and passed to `visit` (cut to
    /// `maxLineBytes`; the flag says whether it was cut) until `visit` returns false; after that lines are only
    /// counted when `countAll` is set, else the scan stops. Returns the lines counted and whether the whole file
    /// was read. Newlines are found with memchr, so counting a 50 MB file is quick and holds one chunk.
    static func scanLines(fd: Int32, from first: Int = 1, countAll: Bool,
                          visit: (_ number: Int, _ text: String, _ cut: Bool) -> Bool) throws
        -> (lines: Int, complete: Bool) {
        let chunkSize = 1 << 16
        var chunk = [UInt8](repeating: 0, count: chunkSize)
        var line = 1
        var current: [UInt8] = []
        var currentLength = 0
        var visiting = true
        var stopped = false
        var offset: off_t = 0

        /// Ends the current line; false when the scan should stop.
        func finishLine() -> Bool {
            defer { line += 1; current.removeAll(keepingCapacity: true); currentLength = 0 }
            guard visiting, line >= first else { return true }
            if currentLength > maxLineBytes {
                current.removeLast(current.count - maxLineBytes)
            } else if current.last == 0x0D {
                current.removeLast()
            }
            visiting = visit(line, String(decoding: current, as: UTF8.self), currentLength > maxLineBytes)
            return visiting || countAll
        }

        while !stopped {
            let count = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, chunkSize, offset) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ToolFailure("read failed (\(errorText(errno)))")
            }
            if count == 0 { break }
            offset += off_t(count)
            chunk.withUnsafeBytes { raw in
                guard let base = raw.baseAddress else { return }
                var start = 0
                while start < count {
                    let found = memchr(base + start, 0x0A, count - start)
                    let end = found.map { base.distance(to: UnsafeRawPointer($0)) } ?? count
                    if visiting, line >= first, current.count <= maxLineBytes {
                        let take = min(end - start, maxLineBytes + 1 - current.count)
                        current.append(contentsOf: UnsafeRawBufferPointer(start: base + start, count: take))
                    }
                    currentLength += end - start
                    guard found != nil else { return }
                    start = end + 1
                    if !finishLine() { stopped = true; return }
                }
            }
        }
        if stopped { return (line - 1, false) }
        if currentLength > 0 { _ = finishLine() }
        return (line - 1, true)
    }

    /// Reads a whole (small) regular file.
    static func readAll(fd: Int32, limit: Int) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ToolFailure("read failed (\(errorText(errno)))")
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<count])
            if bytes.count > limit { throw ToolFailure("the file is larger than \(limit) bytes") }
        }
    }

    /// Creates or replaces a regular file with `bytes`. O_NOFOLLOW: a symlink planted at the final name after
    /// resolution is refused instead of followed out of the workspace. A file with other hard links is refused
    /// before anything is truncated: another name of the same file may be outside the workspace (a hook in
    /// .git/hooks, pnpm's shared store, a file of the user's), and writing in place would change it there too.
    static func writeFile(_ bytes: [UInt8], to path: String, shown: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o644)
        guard fd >= 0 else { throw ToolFailure("cannot write \(shown) (\(errorText(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw ToolFailure("\(shown) is not a regular file; refused")
        }
        guard info.st_nlink <= 1 else {
            throw ToolFailure("\(shown) has \(info.st_nlink) hard links (other names for the same file, possibly "
                + "outside the workspace), and writing it would change them all; refused. Write a new file instead")
        }
        guard ftruncate(fd, 0) == 0 else { throw ToolFailure("cannot write \(shown) (\(errorText(errno)))") }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return write(fd, base + written, raw.count - written)
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw ToolFailure("writing \(shown) failed (\(errorText(errno)))")
            }
            written += count
        }
    }

    /// Creates `path` and any missing parents (mode 0755). The path is a resolved real path whose missing part
    /// holds no symlinks, so nothing here can leave the workspace.
    static func makeDirectories(_ path: String, shown: String) throws {
        var built = ""
        for name in path.split(separator: "/") {
            built += "/" + name
            if mkdir(built, 0o755) != 0, errno != EEXIST {
                throw ToolFailure("cannot create folder for \(shown) (\(errorText(errno)))")
            }
        }
    }

    static func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }
}
