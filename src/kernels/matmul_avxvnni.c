/*
 * matmul_avxvnni.c — matmul_avx2.c compiled a second time for AVX2 + AVX-VNNI (vpdpbusd on
 * ymm, VEX-encoded: Alder Lake and later Intel cores, Zen 5), for the "avxvnni" table
 * (dispatch.c). Compiled with the Makefile's AVX-VNNI flags.
 *
 * Design note:
 *   1. One source, two builds: with KERN_AVXVNNI defined, the Q8_0 dot step of every tile
 *      (vec_avx2_int.h's q8_dot_add) is one vpdpbusd instead of vpmaddubsw, vpmaddwd and
 *      vpaddd, on the same operands (|w| and sign(x, w)); both sum the same integers
 *      exactly, so the tables give the same bits (matmul_avx2.c note 4) and the tests hold
 *      this table to the scalar reference like every other.
 *   2. The entry points are kern_matmul_avxvnni and kern_q8p_panels_avxvnni
 *      (KERN_AVX2_NAME); kern_dot_avx2 and kern_q8_quantize_avx2 have no integer dot and
 *      are not built again: the table uses them as they are.
 *   3. Float weights take the same code as in the AVX2 build (the compiler may schedule it
 *      for the wider ISA; the bits are the contract's either way).
 */
#define KERN_AVXVNNI 1
#include "kernels/matmul_avx2.c"
