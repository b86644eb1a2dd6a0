// Linux-only stand-in for the FoundationModels API subset the FM backend uses. Everything is inside
// `#if !canImport(FoundationModels)` so it can never shadow the real framework.
#if !canImport(FoundationModels)
#endif
