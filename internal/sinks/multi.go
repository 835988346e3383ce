package sinks

import "errors"

// Multi returns a sink that hands every call to each of sinks in order. Each
// sink gets every call even when an earlier one fails; the errors are joined.
func Multi(sinks ...Sink) Sink {
	if len(sinks) == 1 {
		return sinks[0]
	}
	return multi(append([]Sink(nil), sinks...))
}

type multi []Sink

func (m multi) Records(recs []Record) error {
	var errs []error
	for _, s := range m {
		errs = append(errs, s.Records(recs))
	}
	return errors.Join(errs...)
}

func (m multi) Dump(d *Dump) error {
	var errs []error
	for _, s := range m {
		errs = append(errs, s.Dump(d))
	}
	return errors.Join(errs...)
}

func (m multi) Close() error {
	var errs []error
	for _, s := range m {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
