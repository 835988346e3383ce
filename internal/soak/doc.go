// Package soak judges whether a long run's resource samples stay flat.
//
// scripts/soak.sh samples the soaked process every few seconds (RSS,
// threads, open files, the plugin's goroutines, device memory) into a
// tab-separated file; Read parses it, Judge fits a least-squares line to
// each metric of each process and gives a PASS or FAIL against the bounds
// of Rules. It is a package of its own because nothing else in the project
// looks at a run from outside its process.
package soak
