/* onnx_depth.c: bound a protobuf message before protobuf-c unpacks it: its nesting (the unpacker recurses once
 * per nested message, so graphs nested in attributes 100k deep would exhaust the stack) and its sizes (counts of
 * repeated fields, NodeProtos, dims and elements of tensors, and the memory the unpacked C and Lua forms take),
 * measured on the wire format alone, so a hostile file is refused before anything is allocated for it. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>
#include "onnx/onnx.pb-c.h"

/* what ds_onnx_scan measures (proto.lua declares the same struct) */
typedef struct {
	int64_t nodes;        /* NodeProtos, subgraphs' included */
	int64_t max_repeated; /* the most values one repeated field of one message holds */
	int64_t max_dims;     /* the most dims of one TensorProto or TensorShapeProto */
	double max_elements;  /* the largest product of a TensorProto's dims */
	double memory;        /* bytes the unpacked C structs and the Lua tables built from them take, estimated */
} ds_onnx_stats;

/* per message: its C struct and its Lua table; per field set: its C slot and a Lua table entry (a string
 * field's text counts twice: the C copy and the Lua string); per value of a repeated scalar: 8 + 8 bytes */
enum { MESSAGE_COST = 96, FIELD_COST = 40, ELEMENT_COST = 16, MAX_FIELDS = 64 };

/* reads a varint at *p (< end); returns 0 on success */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (*p >= end) return -1;
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) { *out = v; return 0; }
	}
	return -1;
}

/* the values of a packed repeated scalar field of `len` bytes at p: varints counted by their last bytes */
static int64_t packed_count(const ProtobufCFieldDescriptor *f, const uint8_t *p, uint64_t len)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FLOAT: return (int64_t)(len / 4);
	case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_DOUBLE: return (int64_t)(len / 8);
	default: {
		int64_t n = 0;
		for (uint64_t i = 0; i < len; i++) n += !(p[i] & 0x80);
		return n;
	}
	}
}

/* a TensorProto's dims (field 1: int64, packed or not) multiplied, saturating */
static void dims_product(double *product, uint64_t d) { *product *= (double)(int64_t)d; }

/* 0: the message and all it nests are well-formed at the wire level and at most `limit` deep (st accumulates
 * their sizes); -1: malformed wire format; -2: nested deeper than limit */
static int walk(const ProtobufCMessageDescriptor *desc, const uint8_t *p, const uint8_t *end, int limit,
                ds_onnx_stats *st)
{
	if (limit < 0) return -2;
	int64_t counts[MAX_FIELDS] = { 0 };
	int tensor = desc == &onnx__tensor_proto__descriptor, shape = desc == &onnx__tensor_shape_proto__descriptor;
	double product = 1;
	int64_t dims = 0;
	if (desc) st->memory += (double)desc->sizeof_message + MESSAGE_COST;
	if (desc == &onnx__node_proto__descriptor) st->nodes++;
	while (p < end) {
		uint64_t key, len, v;
		if (varint(&p, end, &key)) return -1;
		uint32_t id = (uint32_t)(key >> 3);
		const ProtobufCFieldDescriptor *f = desc ? protobuf_c_message_descriptor_get_field(desc, id) : NULL;
		int64_t n = 1; /* values this occurrence adds to a repeated field */
		st->memory += FIELD_COST;
		switch (key & 7) {
		case 0:
			if (varint(&p, end, &v)) return -1;
			if (tensor && id == 1) { dims_product(&product, v); dims++; }
			break;
		case 1: if (end - p < 8) return -1; p += 8; break;
		case 5: if (end - p < 4) return -1; p += 4; break;
		case 2: {
			if (varint(&p, end, &len) || len > (uint64_t)(end - p)) return -1;
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				int rc = walk(f->descriptor, p, p + len, limit - 1, st);
				if (rc) return rc;
			} else if (f && f->label == PROTOBUF_C_LABEL_REPEATED && f->type != PROTOBUF_C_TYPE_STRING &&
			           f->type != PROTOBUF_C_TYPE_BYTES) {
				n = packed_count(f, p, len);
				st->memory += (double)n * ELEMENT_COST;
				if (tensor && id == 1) {
					const uint8_t *q = p;
					while (q < p + len) {
						if (varint(&q, p + len, &v)) return -1;
						dims_product(&product, v);
						dims++;
					}
				}
			} else {
				st->memory += 2.0 * (double)len;
			}
			p += len;
			break;
		}
		default: return -1; /* groups (3, 4) are not in onnx.proto; 6, 7 do not exist */
		}
		if (f && f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t k = (size_t)(f - desc->fields);
			if (k < MAX_FIELDS) {
				counts[k] += n;
				if (counts[k] > st->max_repeated) st->max_repeated = counts[k];
			}
			if (shape && f->id == 1 && counts[k] > dims) dims = counts[k];
		}
	}
	if (dims > st->max_dims) st->max_dims = dims;
	if (tensor && product > st->max_elements) st->max_elements = product;
	return 0;
}

/* the same for a message of type desc (a ModelProto, a TensorProto of a test's data, ...); st is zeroed first */
int ds_onnx_scan(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, int limit,
                 ds_onnx_stats *st)
{
	memset(st, 0, sizeof *st);
	return walk(desc, data, data + len, limit, st);
}
