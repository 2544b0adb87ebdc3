// Package page is the layout of messages in the buffers a netio link sends
// and receives: pages of length-prefixed records, a message larger than
// what is left of a page going on in the next. It does no I/O: a Writer
// lays records into a buffer, Check vets a received page's header, and a
// Reader walks the records of received pages with a Cursor. Record is the
// one decoder of a record that lies whole in a page; every reader of pages
// goes through it. What a peer sent is never trusted: a decoder never
// panics on it and sizes nothing by a length the bytes claim.
package page
