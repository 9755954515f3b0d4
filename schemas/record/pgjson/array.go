package pgjson

import (
	"encoding/binary"
)

// maxArrayDims is PostgreSQL's MAXDIM.
const maxArrayDims = 6

// arrayAppender returns the appender of a binary array whose elements are written by elem.
func arrayAppender(elem appendFunc) appendFunc {
	return func(dst, src []byte) ([]byte, error) {
		if len(src) < 12 {
			return dst, badData("array", src)
		}
		ndim := int(int32(binary.BigEndian.Uint32(src[0:])))
		if ndim == 0 {
			return append(dst, '[', ']'), nil
		}
		if ndim < 0 || ndim > maxArrayDims || len(src) < 12+8*ndim {
			return dst, badData("array", src)
		}
		var dims [maxArrayDims]int
		total := 1
		for i := 0; i < ndim; i++ {
			n := int(int32(binary.BigEndian.Uint32(src[12+8*i:])))
			if n < 0 || n > len(src) {
				return dst, badData("array", src)
			}
			dims[i] = n
			total *= n
			if total > len(src) {
				return dst, badData("array", src)
			}
		}
		p := &arrayReader{src: src, pos: 12 + 8*ndim, elem: elem}
		dst, err := p.write(dst, dims[:ndim])
		if err != nil {
			return dst, err
		}
		if p.pos != len(src) {
			return dst, badData("array", src)
		}
		return dst, nil
	}
}

type arrayReader struct {
	src  []byte
	pos  int
	elem appendFunc
}

func (p *arrayReader) write(dst []byte, dims []int) ([]byte, error) {
	dst = append(dst, '[')
	for i := 0; i < dims[0]; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if len(dims) > 1 {
			dst, err = p.write(dst, dims[1:])
		} else {
			dst, err = p.element(dst)
		}
		if err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

func (p *arrayReader) element(dst []byte) ([]byte, error) {
	if len(p.src)-p.pos < 4 {
		return dst, badData("array", p.src)
	}
	n := int(int32(binary.BigEndian.Uint32(p.src[p.pos:])))
	p.pos += 4
	if n == -1 {
		return append(dst, "null"...), nil
	}
	if n < 0 || n > len(p.src)-p.pos {
		return dst, badData("array", p.src)
	}
	v := p.src[p.pos : p.pos+n]
	p.pos += n
	return p.elem(dst, v)
}
