// Package hookgen owns the translation of a hook profile into one C source
// that compiles both as CUDA C++ (NVRTC, for the GPU) and as C99 (the system
// C compiler, for the cpu backend), and the Module that describes it to the
// backends, the drain and the decoders: record layouts, symbols, aggregate
// cells, function-name sets and a map from generated lines back to the
// profile.
//
// Generated code comes only from the type-checked expression trees of the
// profile, through a whitelist of expr-lang node types; profile text only
// ever appears inside sanitised C comments.
package hookgen
