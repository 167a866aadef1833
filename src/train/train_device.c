/* The trainer on a GPU (attn_trainer_set_device): the same batches, learning
 * rates and records as the CPU path, with the model on the CUDA engine. */
#include <inttypes.h>
#include <math.h>

#include "train_device.h"
#include "trainer.h"

attn_status attn_trainer_set_device(attn_trainer *tr, attn_device device, attn_precision precision,
                                    attn_error *err) {
    if (device == ATTN_DEVICE_CPU) {
        /* BF16 on the CPU: the model's products through the bf16 engine. */
        attn_status s = attn_precision_check(precision, err);
        if (s || tr->plan_only) return s;
        if (tr->gpu) {
            if ((s = attn_trainer_device_sync(tr, err))) return s;
            attn_cuda_gpt_free(tr->gpu);
            tr->gpu = NULL;
        }
        return attn_gpt_set_precision(&tr->model, precision, err);
    }
    if (tr->gpu) return attn_fail(err, ATTN_ERR_STATE, "the trainer is already on the GPU");
    if (tr->plan_only) return attn_cuda_check(err); /* a dry run: is there a device? */
    struct attn_cuda_gpt *g = NULL;
    attn_status s = attn_cuda_gpt_create(&g, &tr->model, tr->tcfg.batch_size,
                                         tr->mcfg.context_length, precision, err);
    if (s) return s;
    if ((s = attn_cuda_gpt_upload(g, &tr->model, &tr->opt, err))) {
        attn_cuda_gpt_free(g);
        return s;
    }
    tr->gpu = g;
    return ATTN_OK;
}

attn_status attn_trainer_device_step(attn_trainer *tr, double lr, float *loss_out, double *norm_out,
                                     attn_error *err) {
    const int B = tr->tcfg.batch_size, T = tr->mcfg.context_length;
    /* Philox counter: the step being taken, so a resumed run draws the same. */
    attn_cuda_dropout drop = {tr->tcfg.seed, (uint64_t)tr->step};
    float loss = 0;
    attn_status s = attn_cuda_gpt_forward(tr->gpu, tr->xb, tr->yb, B, T, &drop, &loss, err);
    if (s) return s;
    if (!isfinite(loss))
        return attn_fail(err, ATTN_ERR_STATE, "training loss is %g at step %" PRId64 " (diverged)",
                         (double)loss, tr->step + 1);
    if ((s = attn_cuda_gpt_backward(tr->gpu, err))) return s;
    double norm = 0;
    if ((s = attn_cuda_gpt_clip_grad_norm(tr->gpu, tr->tcfg.grad_clip, &norm, err))) return s;
    if ((s = attn_cuda_gpt_adamw_step(tr->gpu, &tr->opt, lr, err))) return s;
    *loss_out = loss;
    *norm_out = norm;
    return ATTN_OK;
}

attn_status attn_trainer_device_eval(attn_trainer *tr, float *loss, attn_error *err) {
    return attn_cuda_gpt_forward(tr->gpu, tr->xb, tr->yb, tr->tcfg.batch_size,
                                 tr->mcfg.context_length, NULL, loss, err);
}

attn_status attn_trainer_device_sync(const attn_trainer *tr, attn_error *err) {
    return attn_cuda_gpt_download(tr->gpu, &tr->model, &tr->opt, err);
}
