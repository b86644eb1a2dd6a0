import Foundation
import AppleCodeCore

// Placeholder entry point until the CLI lands: only --version works.
if CommandLine.arguments.dropFirst().first == "--version" {
    print("apple-code \(AppleCodeVersion.current)")
} else {
    FileHandle.standardError.write("apple-code: not implemented yet\n".data(using: .utf8) ?? .init())
    exit(2)
}
