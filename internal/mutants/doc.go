// Package mutants holds the faults scripts/mutate.sh plants, one patch each.
//
// Each testdata/NN-name.patch is a small change a reviewer would plant (an
// off-by-one in ring positions, two drop stages swapped, a lost final dump,
// a wrong phase, a skipped comm line, ...), with a preamble that git apply
// ignores: a "Fault:" line saying what it breaks and "Tests:" lines naming
// the go test runs that must catch it (a package and a -run pattern).
// scripts/mutate.sh applies each to a copy of the tree, builds and runs its
// tests; this package's test keeps the patches from rotting: each still
// applies to the tree and names tests that exist. It has no Go API.
package mutants
