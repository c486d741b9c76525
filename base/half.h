/* IEEE 754 binary16 and bfloat16 conversions of single values (half.c). */
#ifndef CLINFER_HALF_H
#define CLINFER_HALF_H

#include <stdint.h>

float clinfer_f16_to_f32(uint16_t h);
uint16_t clinfer_f32_to_f16(float f); /* round to nearest even */
/* bfloat16: the top half of an f32. */
float clinfer_bf16_to_f32(uint16_t h);
uint16_t clinfer_f32_to_bf16(float f); /* round to nearest even; nan stays a quiet nan */

#endif
