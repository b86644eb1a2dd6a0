import Testing
@testable import AppleCodeAgent
