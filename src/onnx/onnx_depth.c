/* onnx_depth.c: bound the nesting of a protobuf message before protobuf-c unpacks it (its unpacker recurses
 * once per nested message, so a hostile file nesting graphs in attributes 100k deep would exhaust the stack). */
#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

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

/* 0: the message and all it nests are well-formed at the wire level and at most `limit` deep;
 * -1: malformed wire format; -2: nested deeper than limit */
static int walk(const ProtobufCMessageDescriptor *desc, const uint8_t *p, const uint8_t *end, int limit)
{
	if (limit < 0) return -2;
	while (p < end) {
		uint64_t key, len;
		if (varint(&p, end, &key)) return -1;
		uint32_t id = (uint32_t)(key >> 3);
		switch (key & 7) {
		case 0: if (varint(&p, end, &len)) return -1; break;
		case 1: if (end - p < 8) return -1; p += 8; break;
		case 5: if (end - p < 4) return -1; p += 4; break;
		case 2: {
			if (varint(&p, end, &len) || len > (uint64_t)(end - p)) return -1;
			const ProtobufCFieldDescriptor *f = desc ? protobuf_c_message_descriptor_get_field(desc, id) : NULL;
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				int rc = walk(f->descriptor, p, p + len, limit - 1);
				if (rc) return rc;
			}
			p += len;
			break;
		}
		default: return -1; /* groups (3, 4) are not in onnx.proto; 6, 7 do not exist */
		}
	}
	return 0;
}

/* the same for a message of type desc (a ModelProto, a TensorProto of a test's data, ...) */
int ds_onnx_max_depth(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, int limit)
{
	return walk(desc, data, data + len, limit);
}
