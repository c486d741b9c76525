/* GPT-2's stand-in character for each byte (bytes_to_unicode), for tests that write byte-level
 * BPE vocabularies. Header-only. */
#ifndef CLINFER_TEST_GPT2_BYTES_H
#define CLINFER_TEST_GPT2_BYTES_H

/* The stand-in for byte b, as NUL-terminated UTF-8. */
static inline void byte_char(int b, char out[3]) {
    static int map[256];
    if (!map['!']) {
        int next = 256;
        for (int i = 0; i < 256; i++)
            map[i] = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE) ? i : next++;
    }
    int cp = map[b];
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = '\0';
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = '\0';
    }
}

#endif
