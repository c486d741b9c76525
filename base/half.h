/* IEEE 754 binary16 and bfloat16 conversions of single values (half.c). */
#ifndef CLINFER_HALF_H
#define CLINFER_HALF_H

#include <stdint.h>

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f); /* round to nearest even */
/* bfloat16: the top half of an f32. */
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f); /* round to nearest even; nan stays a quiet nan */

#endif
